// A job's recording as the analysis sees it: per-interval series aligned on the job's own
// ticks, for the job, its ranks and the devices it reads. Plain data shared by the layer that
// builds it (storage reading a recording, the live correlator appending batches) and the one
// that judges it (correlator), so that neither includes the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace stallwatch::model {

using Series = std::vector<std::optional<double>>;

// Interval I of S: none past its end (a series the reader did not fill is empty).
inline std::optional<double> at(const Series& s, size_t i) {
  return i < s.size() ? s[i] : std::nullopt;
}

struct DeviceSeries {
  std::string name;
  std::string via;         // the job's files were on VIA, a device stacked on this one
  bool job_reads = false;  // false: on the host, but the job was never seen using it
  Series r_await_ms, w_await_ms, aqu_sz;
  Series write_bytes_per_s;  // what the device wrote (all writers), to tell where a burst went
  Series read_bytes_per_s;   // what it read (all readers)
  Series util_percent;       // iostat's %util: busy time, meaningful for one-queue devices only
  // Per I/O (the eBPF collector, where it ran): the 99th percentile of the latency of the job's
  // own reads and of everyone else's on the device, and how many of each completed per second.
  Series job_read_p99_ms, others_read_p99_ms, job_reads_per_s, others_reads_per_s;
  bool also_direct = false;  // with VIA set: files were also seen on this device itself

  bool direct() const { return via.empty() || also_direct; }

  // Every per-interval series of the device: the one list of them.
  template <typename Fn>
  void forEachSeries(Fn fn) {
    for (auto* x :
         {&r_await_ms, &w_await_ms, &aqu_sz, &write_bytes_per_s, &read_bytes_per_s, &util_percent,
          &job_read_p99_ms, &others_read_p99_ms, &job_reads_per_s, &others_reads_per_s})
      fn(*x);
  }
  template <typename Fn>
  void forEachSeries(Fn fn) const {
    for (auto* x :
         {&r_await_ms, &w_await_ms, &aqu_sz, &write_bytes_per_s, &read_bytes_per_s, &util_percent,
          &job_read_p99_ms, &others_read_p99_ms, &job_reads_per_s, &others_reads_per_s})
      fn(*x);
  }
};

// What a job and each of its ranks share, per interval: how fast the loop went and what it
// waited on. The job's figures are over all of it (its GPUs' mean, its ranks' steps and reads
// summed, the least busy rank's main thread); a rank's are its own processes' and its GPU's.
// The limiter and the detector read a job or one rank through this one shape.
struct PaceSeries {
  Series gpu_util_percent;  // the job's: mean over its GPUs
  Series gpu_work_percent;  // GPM work (gpuWorkPercent); the job's: mean over its GPUs
  Series steps, data_wait_s, step_s;
  Series read_bytes_per_s, write_bytes_per_s, workers_cpu, d_state_threads;
  // The main process's main thread (the job's: the least busy of several ranks'): its CPU
  // (cores) and its share of the interval runnable but waiting for a CPU; its workers and the
  // processes stopped (T).
  Series main_thread_cpu, main_thread_runqueue, workers, stopped_processes;
  Series main_cpu;  // the main process(es), all threads (cores)
  // Where the main thread slept, sampled several times a second: the DataLoader's result queue
  // (its share of the samples), a futex (CUDA's sync, or pinned batches'), pin_memory on (0/1).
  Series main_thread_loader_wait, main_thread_futex_wait, pin_memory;
  // Its own cgroup (v2) where it has one (with those above it): its reads on the device the
  // nearest io.max limits and that limit, the share of the interval its CPU quota throttled it,
  // its I/O pressure.
  Series cgroup_limited_read_bytes_per_s, cgroup_read_limit_bytes_per_s, cgroup_cpu_throttled,
      cgroup_io_some;

  // Every per-interval series it shares: the one list of them.
  template <typename Fn>
  void forEachSeries(Fn fn) {
    each(*this, fn);
  }
  template <typename Fn>
  void forEachSeries(Fn fn) const {
    each(*this, fn);
  }

 private:
  template <typename Self, typename Fn>
  static void each(Self& s, Fn fn) {
    for (auto* x : {&s.gpu_util_percent,
                    &s.gpu_work_percent,
                    &s.steps,
                    &s.data_wait_s,
                    &s.step_s,
                    &s.read_bytes_per_s,
                    &s.write_bytes_per_s,
                    &s.workers_cpu,
                    &s.d_state_threads,
                    &s.main_thread_cpu,
                    &s.main_thread_runqueue,
                    &s.workers,
                    &s.stopped_processes,
                    &s.main_cpu,
                    &s.main_thread_loader_wait,
                    &s.main_thread_futex_wait,
                    &s.pin_memory,
                    &s.cgroup_limited_read_bytes_per_s,
                    &s.cgroup_read_limit_bytes_per_s,
                    &s.cgroup_cpu_throttled,
                    &s.cgroup_io_some}) {
      fn(*x);
    }
  }
};

// One rank of a synchronous multi-GPU job: its processes' figures and its GPU's.
struct RankSeries : PaceSeries {
  int32_t rank = 0;
  uint32_t pid = 0;
  std::string gpu;   // UUID
  std::string node;  // the host it ran on, in a job read across nodes; "" within one node
};

// A job: its pace (the whole job's), the host's figures beside it, its devices and its ranks.
struct JobSeries : PaceSeries {
  std::vector<int64_t> ts_ms;  // end of each interval
  std::vector<double> interval_s;
  uint32_t gpu_count = 0;
  Series io_some, cpu_some;  // host pressure shares, 0..1
  Series memory_some;        // the host's memory pressure (reclaim), evidence only
  // The host's CPUs: cores' worth busy, and online; the CPUs the job may use (affinity within
  // its cgroups' quota).
  Series host_busy_cores, host_online_cpus, cpus_allowed;
  Series rchar_per_s;  // bytes read through read calls, page-cache hits included
  // The job's own cgroup's CPU pressure, and its memory pressure (reclaim: page-cache hits
  // turned into reads; evidence only).
  Series cgroup_cpu_some, cgroup_memory_some;
  // The limits in force at each interval, for people ("" when none was set); may be shorter
  // than the series (a run read across nodes has none).
  std::vector<std::string> cgroup_limits;
  // Where most of the job's D-state threads waited (a kernel function), "" when none did or
  // it is not known; may be shorter than the series (a run read across nodes has none).
  std::vector<std::string> d_state_wchan;
  // Where the job's main process slept (S) while it did not run, "" elsewhere: where an idle
  // job waits. May be shorter than the series.
  std::vector<std::string> sleep_wchan;
  // Who else used the job's devices, as stored (collectors' encodeDeviceUsers), on the
  // intervals where it was read; "" elsewhere. May be shorter than the series.
  std::vector<std::string> neighbour_io;
  // Where its workers slept (S) for two ticks or more, the most common; "" elsewhere.
  std::vector<std::string> workers_sleep_wchan;
  // The io.max limit nearest its use, with the cgroup that sets it (the job's own or one above
  // it), "" where none applied; may be shorter than the series.
  std::vector<std::string> cgroup_read_limit;
  std::vector<DeviceSeries> devices;
  std::vector<RankSeries> ranks;  // two or more, or none
  // When the job's processes had all exited, where the recording says (a post-mortem); none
  // while it runs. Lets the analysis tell a job winding down from one that hangs.
  std::optional<int64_t> ended_ms;
  size_t size() const { return ts_ms.size(); }

  // Every per-interval text (wait channels, limits, neighbours): the one list of them.
  template <typename Fn>
  void forEachText(Fn fn) {
    for (auto* x : {&d_state_wchan, &sleep_wchan, &cgroup_limits, &neighbour_io,
                    &workers_sleep_wchan, &cgroup_read_limit})
      fn(*x);
  }
  template <typename Fn>
  void forEachText(Fn fn) const {
    for (auto* x : {&d_state_wchan, &sleep_wchan, &cgroup_limits, &neighbour_io,
                    &workers_sleep_wchan, &cgroup_read_limit})
      fn(*x);
  }

  // Every per-interval series (the job's, its devices', its ranks'), for code that cuts or
  // trims them all alike; ts_ms and interval_s are not Series and are left to the caller.
  template <typename Fn>
  void forEachSeries(Fn fn) {
    each(*this, fn);
  }
  template <typename Fn>
  void forEachSeries(Fn fn) const {
    each(*this, fn);
  }

 private:
  // The one list, for a series to change (JobSeries&) or to read (const JobSeries&): the pace
  // it shares with its ranks, then its own.
  template <typename Self, typename Fn>
  static void each(Self& s, Fn fn) {
    static_cast<std::conditional_t<std::is_const_v<Self>, const PaceSeries, PaceSeries>&>(s)
        .forEachSeries(fn);
    for (auto* x :
         {&s.io_some, &s.cpu_some, &s.memory_some, &s.host_busy_cores, &s.host_online_cpus,
          &s.cpus_allowed, &s.rchar_per_s, &s.cgroup_cpu_some, &s.cgroup_memory_some}) {
      fn(*x);
    }
    for (auto& d : s.devices) d.forEachSeries(fn);
    for (auto& r : s.ranks) r.forEachSeries(fn);
  }
};

// Building a JobSeries: the one way the live correlator (a batch at a time) and the recording
// reader (row by row) assemble one, so that every series keeps the same length and devices and
// ranks the same order whichever path built it.
//
// Opens interval I = size() at TS_MS, every series (the job's, each device's, each rank's)
// empty for it; returns I.
size_t appendInterval(JobSeries& series, int64_t ts_ms, double interval_s);
// The device NAME the job's files were seen on (directly, or under VIA), or, with JOB_READS
// false, one of the host's other devices: created with an empty history, or given its second
// relation (a device both holding files and under a device that holds others). Devices stay
// in one order: the job's, those it reads directly first, then by name; then the others by name.
DeviceSeries& addDevice(JobSeries& series, const std::string& name, const std::string& via,
                        bool job_reads);
// The rank RANK, created with an empty history; ranks stay in rank order.
RankSeries& addRank(JobSeries& series, int32_t rank);
// Drops the first N intervals of every series.
void dropFront(JobSeries& series, size_t n);
// The series from interval FIRST on.
JobSeries tailOf(const JobSeries& series, size_t first);

// What a job's progress is judged by, best first (correlator/stall_detector.h says why):
// dataloader steps, GPM work, the least busy rank's GPU utilisation, GPU utilisation.
enum class ProgressSignal { kNone, kSteps, kGpuWork, kSlowestRankGpuUtil, kGpuUtil };
const char* toString(ProgressSignal signal);  // "steps", "gpu_work", ..., "" for none

}  // namespace stallwatch::model
