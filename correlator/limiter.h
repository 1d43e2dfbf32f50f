// The standing bottleneck verdict (model/limiter.h): what limits a job's pace over a span, what
// waiting for input costs in GPU time, and what the job would gain if input kept up. Pure
// computation over the series, like the stall detector: the post-mortem judges the whole run
// and its windows, the live agent a sliding window, on the same sums.
//
// The share of time the loop waited for input comes from the dataloader hook where the job
// reports (its time waiting for the next batch, against its time in steps); without it, from
// where the main thread slept, sampled ten times a second (collectors/jobs/wait_sampler.h): the
// share of samples in the DataLoader's result queue. It misses the CPU the loop spends
// receiving a batch (running, not waiting), so it reads a few points under the job's own
// account. With pin_memory the loop waits on the pinning thread's queue, a futex like CUDA's
// synchronisation: the GPU's idle share (idle while the loop waits for its batch, busy while the
// loop waits on it) and the main thread's running share bound the wait, the middle of the bounds
// is the share, and bounds across the share that decides make the verdict unknown. Recordings
// without the samples fall back to the lesser of the main thread's sleeping share and the GPU's
// idle share, except for the ranks of a job of several, whose sleep is as much the collective's as
// the input's: unknown.
//
// With that share under input_wait_share the GPU side sets the pace (gpu), unless the GPU sat
// idle while the main thread ran flat out (host). Over it, the input side does, and what holds
// it is told by the workers' time: reads at a cgroup's io.max (io-throttled), threads waiting
// on I/O (input-storage), workers busy on their CPUs (input-cpu), or neither with cores free
// (input-workers).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "correlator/stall_detector.h"
#include "model/limiter.h"

namespace stallwatch::correlator {

struct LimiterConfig {
  double window_s = 300;  // the post-mortem's windows (phases are runs of them)
  // The loop waited this share or more: input limits it. Under it, the loader's own per-batch
  // cost: a GPU-bound ResNet-50 fed from memory on an H100 still waited 10 % of its steps
  // (receiving 9.6 MB batches from its workers), by the hook and by its own step log.
  double input_wait_share = 0.15;
  double worker_cpu_bound = 0.6;       // cores per worker: the workers are CPU-bound
  double worker_io_bound = 0.25;       // threads in D per worker: the workers wait on reads
  double at_io_limit = 0.8;            // reads at this share of io.max: the limit holds them
  double host_gpu_idle = 0.3;          // the GPU idle this share while ...
  double host_main_cpu = 0.85;         // ... the main thread ran this much: host-bound; or, where
  double host_sampled_main_cpu = 0.6;  // its waits are sampled, this much with its GPU sync
                                       // wait under half of it
  double memory_pressure = 0.10;       // memory PSI some: reclaim evicts the job's data
  double device_busy_percent = 90;
  double free_cores = 1.5;  // cores left for more workers
};

// The figures of a span of intervals as sums (seconds-weighted), so that spans add up (a
// phase is its windows) and a live window slides (add the newest, take the oldest away).
class InputFigures {
 public:
  // Interval I of SERIES, as the job (RANK null) or as one of its ranks sees it. SIGN: +1 to
  // add, -1 to take it away again.
  void add(const model::JobSeries& series, size_t i, const model::RankSeries* rank = nullptr,
           int sign = 1);
  void merge(const InputFigures& other);
  double seconds() const { return seconds_; }
  bool empty() const { return seconds_ <= 0; }

 private:
  friend model::LimiterVerdict judgeLimiter(const InputFigures& f, const LimiterConfig& config);
  // The share of the time the loop waited for input, as these figures show it; none where they
  // do not say (V's figures say why: the verdict is unknown).
  std::optional<double> inputWait(const LimiterConfig& config, std::optional<double> gpu_idle,
                                  std::optional<double> thread_cpu,
                                  std::optional<double> thread_sleep,
                                  model::LimiterVerdict& v) const;
  // The job's and the host's cores, its memory pressure and CPU throttling, as judgeLimiter
  // reads them; each one read is added to V's figures.
  struct Cores {
    double workers = 0, cpu_per_worker = 0, d_per_worker = 0;
    bool have_workers = false;
    std::optional<double> workers_cpu, free_cores, online, host_busy, memory, throttled;
  };
  Cores cores(model::LimiterVerdict& v) const;
  // io-throttled: the reads held at a cgroup's io.max for AT_LIMIT of the time; V's class,
  // figures and advice.
  void judgeIoThrottled(model::LimiterVerdict& v, double at_limit, double confidence) const;
  static constexpr int kWaitBins = 20;  // per-interval wait shares, 0.05 wide: quantiles
  double seconds_ = 0, gpus_ = 0;
  // The hook: time waiting, time in steps, steps, and the seconds it reported in.
  double wait_s_ = 0, step_s_ = 0, steps_ = 0, hook_seconds_ = 0;
  // The main thread: CPU and run-queue seconds; the main process's CPU seconds.
  double thread_busy_ = 0, thread_runqueue_ = 0, thread_seconds_ = 0, main_cpu_ = 0;
  double gpu_idle_ = 0, gpu_seconds_ = 0;  // GPU idle share x seconds, where read
  double workers_ = 0, workers_cpu_ = 0, d_state_ = 0, process_seconds_ = 0;
  double read_bytes_ = 0, rchar_ = 0;
  double host_busy_ = 0, host_online_ = 0, host_seconds_ = 0;
  double cpus_allowed_ = 0, cpus_allowed_seconds_ = 0;
  double at_limit_seconds_ = 0, limit_seconds_ = 0, limited_read_ = 0, read_limit_ = 0;
  double memory_some_ = 0, memory_seconds_ = 0, cpu_throttled_ = 0, throttle_seconds_ = 0;
  double loader_wait_ = 0, futex_wait_ = 0, pin_memory_ = 0, sampled_seconds_ = 0;
  double collective_seconds_ = 0;  // seconds of a job of several ranks (or one of its ranks)
  std::array<double, kWaitBins> wait_bins_{};  // seconds by per-interval wait share
  struct Device {
    std::string via;
    bool direct = true;
    bool mount = false;  // a mount target (FUSE, NFS): its %util means nothing
    double util_ = 0, util_seconds_ = 0, await_ = 0, await_seconds_ = 0, aqu_ = 0, read_ = 0;
    double seconds_ = 0;
    double busy() const;  // %util, or for a mount the equivalent of its queue
  };
  std::map<std::string, Device> devices_;  // the job's
  // The device the reads wait on: the busiest of those the job reads, the one its files are on
  // (not the disk under it) where both are busy alike; null where it read from none.
  const std::pair<const std::string, Device>* busiestDevice() const;
  // Texts by the seconds they held: the binding io.max, where workers and D threads wait.
  std::map<std::string, double> read_limits_, workers_sleep_, d_state_wchans_;
};

// The verdict over a span's figures.
model::LimiterVerdict judgeLimiter(const InputFigures& figures, const LimiterConfig& config = {});

// Which intervals of SERIES the verdict judges: from the first to the last interval with
// progress (a job's start-up and winding down are not its pace), less the incidents, the idle
// end and the phases outside the loop that ANALYSIS found (acute stalls keep their own account).
// Where the incidents cover most of the span (its remainder under half of it), they are judged
// with it instead of cut, and INCIDENTS_SHARE (if given) is set to their share: the standing
// verdict is then the run's, incidents and all, rather than a small remainder's.
std::vector<bool> limiterIntervals(const model::JobSeries& series, const Analysis& analysis,
                                   std::optional<double>* incidents_share = nullptr);

// The verdict over intervals FIRST..LAST of SERIES, those IN (null: all) only: the job's, or
// for a job of several ranks the verdict of the rank that waited most for input, costing every
// GPU of the job. What the live agent says of a job's last minute, and `top` of a recording's.
model::LimiterVerdict judgeSpan(const model::JobSeries& series, size_t first, size_t last,
                                const std::vector<bool>* in = nullptr,
                                const LimiterConfig& config = {});

// The post-mortem: the whole run, windows of config.window_s, phases, and each rank.
model::JobLimits analyzeLimits(const model::JobSeries& series, const Analysis& analysis,
                               const LimiterConfig& config = {});

// One line for people: "input-cpu: the GPU waited 35 % of the run (0.41 GPU-h); the 12 workers
// used 8.9 cores of 16 - more workers could reach up to ~1.5x (32 steps/s)". SPAN names the
// window; by default "the run", or "the run outside incidents" where they were left out.
std::string describeLimiter(const model::LimiterVerdict& verdict, const std::string& span = "");

}  // namespace stallwatch::correlator
