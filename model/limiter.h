// What limits a job when nothing has gone wrong: the standing bottleneck verdict (issue 31),
// beside the incidents (acute stalls against the job's own past). Plain data: the correlator
// fills it, the CLI, `top`, /metrics and the Slurm epilog say it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stallwatch::model {

// What the job's pace was held by over a span:
//   gpu            the GPU: the loop hardly waited for input; nothing to gain from the input side
//   input-cpu      the DataLoader workers are CPU-bound (decoding, augmentation)
//   input-workers  too few workers: they are neither CPU- nor I/O-bound, cores are free, and the
//                  main process waits for batches
//   input-storage  the workers wait on reads: a device or mount, named, at its limit or not
//   io-throttled   a cgroup's io.max holds the job's reads, named
//   host           the main process itself is CPU-bound outside the GPU's work, or memory
//                  pressure evicts its data
//   unknown        the evidence does not decide
enum class Limiter { kGpu, kInputCpu, kInputWorkers, kInputStorage, kIoThrottled, kHost, kUnknown };
inline constexpr int kLimiterCount = 7;
const char* toString(Limiter limiter);                       // "gpu", "input-cpu", ...
std::optional<Limiter> limiterNamed(std::string_view name);  // toString's inverse

// Where the share of time spent waiting for input came from.
enum class WaitSource {
  kNone,
  kHook,        // the dataloader hook: the loop's own time waiting for its next batch
  kSampled,     // no hook: the main thread found asleep in the DataLoader's queue, sampled 10x/s
  kMainThread,  // older recordings: the main thread asleep while its GPU sat idle (the lesser)
};
const char* toString(WaitSource source);  // "hook", "main_thread_sampled", "main_thread", ""

// What a figure of a verdict measures (issue 45: typed, as evidence is; the rules and the
// words test the kind, never the name). Its name and unit are one row of model.cpp's table.
enum class FigureKind {
  kInputWaitShare,     // share of the loop's time waiting for input (how: its note)
  kInputWaitBetween,   // pin_memory: the bounds of that share (its subject: "20 and 40 %")
  kInputWaitShareLow,  // the bounds' low and high ends
  kInputWaitShareHigh,
  kNoWaitFigures,             // nothing measured the wait (why: its note)
  kNoProgress,                // the job never progressed in the range
  kPinMemory,                 // the loop pins its batches (1; how its wait was read: its note)
  kMainThreadFutexWaitShare,  // the main thread asleep on a futex (CUDA's sync, pinned batches)
  kMainThreadCpu,             // the main thread's CPU, cores
  kMainThreadRunqueue,        // its share of the time runnable but waiting for a CPU
  kMainThreadGpuSyncShare,    // its share asleep in CUDA's sync (sampled)
  kGpuIdleShare,              // the GPU's share of the time idle
  kMemorySome,                // memory pressure (some): reclaim evicting the data
  kWorkers,                   // DataLoader workers
  kWorkersCpuCores,           // their CPU, cores
  kWorkersCpuPerWorker,       // cores a worker
  kDStateThreadsPerWorker,    // threads in D (waiting on I/O) a worker
  kDeviceQueuePerWorker,      // a mount's queue a worker
  kHostCpusOnline,
  kHostCpusBusy,
  kJobCpusAllowed,  // the CPUs the job may use (affinity, its cgroups' quota)
  kCpusFree,
  kCgroupCpuThrottledShare,  // the share of the time its CPU quota throttled it
  kDeviceBusyPercent,        // the busiest device (its subject) busy, iostat's %util
  kReadAwaitMs,              // its read await
  kQueueSize,                // its queue (aqu-sz)
  kDeviceReadBytesPerS,      // its reads
  kDStateWait,               // where the threads in D waited (subject: the kernel function)
  kJobCgroupReadBytesPerS,   // the job's reads on the device its io.max limits
  kIoMaxReadBytesPerS,       // that limit
  kShareOfTimeAtIoMax,       // the share of the time its reads sat at the limit
  kAgentReadingsNamingIt,    // from Prometheus: the share of the agent's readings naming it
};
inline constexpr int kFigureKindCount = 32;
const char* toString(FigureKind kind);  // "input_wait_share", "r_await_ms", ...
const char* unitOf(FigureKind kind);    // "share", "cores", "ms", "bytes/s", "count", ...

// One figure the verdict rests on, as measured over the span: "workers_cpu_per_worker 0.94",
// and whether it decided the class.
struct LimiterFigure {
  FigureKind kind = FigureKind::kInputWaitShare;
  double value = 0;
  bool decides = false;
  std::string subject;  // what it is of: a device ("vda"), a kernel function; "" for the job
  std::string note;     // for people, how it was read or what it means: "(dataloader hook)"
  // As every output says it: its kind's name, subject and note ("r_await_ms vda").
  std::string name() const;
};

// What a piece of advice asks for, for a program to act on (issue 42); its sentence says it to
// people, with the evidence behind it.
enum class AdviceKind {
  kMoreWorkers,         // more DataLoader workers (or any, num_workers > 0)
  kFasterStorage,       // the data on a faster device or store
  kPageCache,           // keep the dataset in memory
  kRaiseCpuQuota,       // cpu.max
  kFasterDecoding,      // cheaper decoding and augmentation per sample
  kLargerPrefetch,      // prefetch_factor
  kFreeHostCpus,        // the host's CPUs are all in use
  kMoveMainThreadWork,  // per-step CPU work off the main thread, fewer larger kernels
  kMoreMemory,          // memory.high / memory.max
  kRaiseReadLimit,      // io.max
};
const char* toString(AdviceKind kind);  // "more-workers", "faster-storage", ...

struct Advice {
  AdviceKind kind;
  std::string text;
};

struct LimiterVerdict {
  int64_t start_ms = 0, end_ms = 0;  // the span judged (its intervals' start and end)
  double seconds = 0;                // time judged: the span less incidents and gaps
  // The incidents were judged with the rest: they covered most of the run, and what was left
  // outside them was too little to say what limits the job (issue 41). Their share of the run.
  std::optional<double> incidents_included_share;
  Limiter limiter = Limiter::kUnknown;
  double confidence = 0;
  WaitSource wait_source = WaitSource::kNone;
  double input_wait_share = 0;        // of the judged time, the loop waited for input
  double gpus = 0;                    // GPUs of the job (or the rank)
  double input_wait_gpu_seconds = 0;  // input_wait_share x seconds x GPUs
  // The pace now, where the job reports steps, and what it would reach if input kept up: the
  // speed-up (x) with its range where the figures vary.
  std::optional<double> steps_per_second;
  double speedup = 1, speedup_low = 1, speedup_high = 1;
  // The device or mount the reads wait on (input-storage, io-throttled), and the disk under it.
  std::string device, physical_device;
  bool device_at_limit = false;
  std::string limit;  // io-throttled: the io.max limit and the cgroup that sets it
  std::vector<LimiterFigure> figures;
  std::vector<Advice> advice;  // each names the evidence behind it; none for gpu
};

// A job's verdicts: over its whole run, over each window of it, and its phases (windows in a
// row with the same limiter, judged together). Jobs of several ranks: each rank's whole-run
// verdict; the job's is the verdict of the rank that waited most for input.
struct RankLimiter {
  int32_t rank = 0;
  LimiterVerdict verdict;
};
struct JobLimits {
  LimiterVerdict run;
  std::vector<LimiterVerdict> windows;
  std::vector<LimiterVerdict> phases;
  std::vector<RankLimiter> ranks;
  std::optional<int32_t> slowest_rank;  // the rank whose verdict is the job's
  double window_seconds = 0;
};

}  // namespace stallwatch::model
