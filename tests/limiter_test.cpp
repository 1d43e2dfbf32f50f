// The bottleneck verdict (correlator/limiter.h): each class from the figures that decide it,
// the wait share from the hook or from the main thread and its GPU, the speed-up on offer,
// windows merged into phases, the rank that waited most, and what it leaves out.
#include "correlator/limiter.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "correlator/stall_detector.h"

namespace stallwatch::correlator {
namespace {

using model::Limiter;
using model::WaitSource;

// A job of one GPU on a 16-CPU host, reading through loop0 (over vda), sampled every second.
// Each interval's figures are set by the test through the fields below.
struct Job {
  model::JobSeries s;
  std::mt19937 rng{7};
  double jitter(double x, double spread = 0.05) {
    return x * std::uniform_real_distribution<double>(1 - spread, 1 + spread)(rng);
  }

  // hook: report steps; wait: the loop's share waiting for input; workers, each at cpu cores
  // and d threads in D; util: the GPU's utilisation; thread: the main thread's CPU.
  struct Interval {
    bool hook = true;
    double steps = 20, wait = 0.05;
    double workers = 8, cpu_per_worker = 0.3, d_per_worker = 0.02;
    double util = 90, thread = 0.95, runqueue = 0;
    double host_busy = 6, online = 16;
    double device_util = 30, aqu = 0.5, r_await = 0.3;
    std::optional<double> limit, limited_read;
    std::string read_limit;
    double memory_some = 0;
  };

  Job() {
    s.gpu_count = 1;
    model::addDevice(s, "loop0", "", true);
    model::addDevice(s, "vda", "loop0", true);
  }

  void add(const Interval& x, size_t count = 1) {
    for (size_t k = 0; k < count; ++k) {
      const size_t i =
          model::appendInterval(s, 1'000'000 + static_cast<int64_t>(s.size()) * 1000, 1.0);
      if (x.hook) {
        s.steps[i] = jitter(x.steps * (1 - x.wait) / 0.95);
        s.data_wait_s[i] = jitter(x.wait);
        s.step_s[i] = 1.0 - *s.data_wait_s[i];
      }
      s.workers[i] = x.workers;
      s.workers_cpu[i] = jitter(x.workers * x.cpu_per_worker);
      s.d_state_threads[i] = std::round(jitter(x.workers * x.d_per_worker, 0.5));
      s.gpu_util_percent[i] = std::min(100.0, jitter(x.util));
      s.main_thread_cpu[i] = std::min(1.0, jitter(x.thread));
      s.main_thread_runqueue[i] = x.runqueue;
      s.main_cpu[i] = *s.main_thread_cpu[i] + 0.2;
      s.host_busy_cores[i] = jitter(x.host_busy);
      s.host_online_cpus[i] = x.online;
      s.read_bytes_per_s[i] = jitter(100e6);
      s.rchar_per_s[i] = jitter(101e6);
      s.cgroup_read_limit_bytes_per_s[i] = x.limit;
      s.cgroup_limited_read_bytes_per_s[i] = x.limited_read;
      s.cgroup_read_limit[i] = x.read_limit;
      s.memory_some[i] = x.memory_some;
      for (auto& d : s.devices) {
        d.util_percent[i] = std::min(100.0, jitter(d.name == "loop0" ? x.device_util : 20));
        d.aqu_sz[i] = jitter(d.name == "loop0" ? x.aqu : 0.2);
        d.r_await_ms[i] = jitter(d.name == "loop0" ? x.r_await : 0.2);
        d.read_bytes_per_s[i] = jitter(100e6);
      }
    }
  }

  model::JobLimits judge(const LimiterConfig& cfg = {}) {
    const Analysis a = analyzeJob(s);
    return analyzeLimits(s, a, cfg);
  }
};

bool advises(const model::LimiterVerdict& v, const std::string& text) {
  for (const auto& a : v.advice)
    if (a.text.find(text) != std::string::npos) return true;
  return false;
}

bool advisesKind(const model::LimiterVerdict& v, model::AdviceKind kind) {
  for (const auto& a : v.advice)
    if (a.kind == kind) return true;
  return false;
}

TEST(Limiter, AJobThatHardlyWaitsIsGpuBoundAndGetsNoAdvice) {
  Job job;
  job.add({}, 120);
  const auto l = job.judge();
  EXPECT_EQ(l.run.limiter, Limiter::kGpu);
  EXPECT_EQ(l.run.wait_source, WaitSource::kHook);
  EXPECT_NEAR(l.run.input_wait_share, 0.05, 0.01);
  EXPECT_TRUE(l.run.advice.empty());
  EXPECT_GT(l.run.confidence, 0.5);
}

// The example: 12 workers at ~0.74 of a core each is not yet CPU-bound per worker at
// the default 0.6? It is: 0.74 >= 0.6. The loop waits 35 %: input-cpu, up to ~1.54x, and with
// 16 CPUs and about 10 busy there is room for more workers.
TEST(Limiter, CpuBoundWorkersAreInputCpuWithTheSpeedUpAndMoreWorkersWhereCoresAreFree) {
  Job job;
  Job::Interval x;
  x.wait = 0.35;
  x.steps = 21;
  x.workers = 12;
  x.cpu_per_worker = 0.74;
  x.util = 51;
  x.thread = 0.6;
  x.host_busy = 10;
  job.add(x, 300);
  const auto l = job.judge();
  ASSERT_EQ(l.run.limiter, Limiter::kInputCpu) << describeLimiter(l.run);
  EXPECT_NEAR(l.run.input_wait_share, 0.35, 0.02);
  EXPECT_NEAR(l.run.speedup, 1.0 / 0.65, 0.05);
  EXPECT_LE(l.run.speedup_low, l.run.speedup);
  EXPECT_GE(l.run.speedup_high, l.run.speedup);
  ASSERT_TRUE(l.run.steps_per_second);
  EXPECT_NEAR(*l.run.steps_per_second * l.run.speedup, 21 / 0.95, 1.5);
  EXPECT_NEAR(l.run.input_wait_gpu_seconds, 0.35 * 300, 8);
  EXPECT_TRUE(advises(l.run, "more DataLoader workers")) << l.run.advice.front().text;
  EXPECT_TRUE(advisesKind(l.run, model::AdviceKind::kMoreWorkers));
  EXPECT_TRUE(advises(l.run, "faster decoding"));
  const std::string line = describeLimiter(l.run);
  EXPECT_NE(line.find("input-cpu: the loop waited for input 35 %"), std::string::npos) << line;
  EXPECT_NE(line.find("the 12 workers used 8.9 cores of 16"), std::string::npos) << line;
}

// The same job on a host whose CPUs are all taken: no "more workers" (no core to give them).
TEST(Limiter, NoMoreWorkersAdvisedWithoutFreeCores) {
  Job job;
  Job::Interval x;
  x.wait = 0.35;
  x.workers = 12;
  x.cpu_per_worker = 0.9;
  x.host_busy = 15.8;
  job.add(x, 200);
  const auto l = job.judge();
  EXPECT_EQ(l.run.limiter, Limiter::kInputCpu);
  EXPECT_FALSE(advises(l.run, "more DataLoader workers"));
  EXPECT_TRUE(advises(l.run, "faster decoding"));
}

TEST(Limiter, WorkersNeitherCpuNorIoBoundWithCoresFreeAreTooFew) {
  Job job;
  Job::Interval x;
  x.wait = 0.4;
  x.workers = 2;
  x.cpu_per_worker = 0.3;
  x.d_per_worker = 0.05;
  job.add(x, 200);
  const auto l = job.judge();
  EXPECT_EQ(l.run.limiter, Limiter::kInputWorkers) << describeLimiter(l.run);
  EXPECT_TRUE(advises(l.run, "more DataLoader workers"));
}

TEST(Limiter, WorkersWaitingOnReadsAreInputStorageAndTheBusyDeviceIsNamed) {
  Job job;
  Job::Interval x;
  x.wait = 0.5;
  x.workers = 8;
  x.cpu_per_worker = 0.15;
  x.d_per_worker = 0.6;
  x.device_util = 99;
  x.aqu = 7;
  x.r_await = 40;
  job.add(x, 200);
  const auto l = job.judge();
  ASSERT_EQ(l.run.limiter, Limiter::kInputStorage) << describeLimiter(l.run);
  EXPECT_EQ(l.run.device, "loop0");
  EXPECT_TRUE(l.run.device_at_limit);
  EXPECT_TRUE(advises(l.run, "faster device"));
  EXPECT_TRUE(advises(l.run, "miss the page cache"));  // rchar ~ read_bytes
}

TEST(Limiter, ReadsAtACgroupLimitAreIoThrottledWithTheLimitNamed) {
  Job job;
  Job::Interval x;
  x.wait = 0.6;
  x.cpu_per_worker = 0.1;
  x.d_per_worker = 0.5;
  x.limit = 15.0 * (1 << 20);
  x.limited_read = 14.8 * (1 << 20);
  x.read_limit =
      "io.max 7:0 (loop0) rbps=15.0 MiB/s in /sys/fs/cgroup/tenant (parent of the job's cgroup)";
  job.add(x, 200);
  const auto l = job.judge();
  ASSERT_EQ(l.run.limiter, Limiter::kIoThrottled) << describeLimiter(l.run);
  EXPECT_EQ(l.run.limit, x.read_limit);
  EXPECT_EQ(l.run.device, "loop0");
  EXPECT_TRUE(advises(l.run, "lift or raise the read limit"));
}

// No hook: the main thread ran flat out while the GPU sat idle half the time.
TEST(Limiter, AMainThreadCpuBoundOutsideTheGpusWorkIsHost) {
  Job job;
  Job::Interval x;
  x.hook = false;
  x.thread = 0.99;
  x.util = 50;
  job.add(x, 200);
  const auto l = job.judge();
  EXPECT_EQ(l.run.wait_source, WaitSource::kMainThread);
  EXPECT_EQ(l.run.limiter, Limiter::kHost) << describeLimiter(l.run);
  EXPECT_TRUE(advises(l.run, "main thread ran"));
}

// No hook: the main thread asleep 40 % and the GPU idle 45 %: the loop waited the lesser, 40 %.
TEST(Limiter, WithoutTheHookTheWaitIsTheLesserOfTheMainThreadsSleepAndTheGpusIdle) {
  Job job;
  Job::Interval x;
  x.hook = false;
  x.thread = 0.6;
  x.util = 55;
  x.workers = 4;
  x.cpu_per_worker = 0.95;
  job.add(x, 200);
  const auto l = job.judge();
  EXPECT_EQ(l.run.wait_source, WaitSource::kMainThread);
  EXPECT_NEAR(l.run.input_wait_share, 0.4, 0.03);
  EXPECT_EQ(l.run.limiter, Limiter::kInputCpu);
  EXPECT_FALSE(l.run.steps_per_second);
}

// No hook, the main thread sampled: 45 % of samples in the DataLoader's queue is the wait, even
// though the main thread also slept in CUDA's sync (its sleeping share is larger).
TEST(Limiter, WithoutTheHookTheSampledQueueWaitIsTheWait) {
  Job job;
  Job::Interval x;
  x.hook = false;
  x.thread = 0.35;  // asleep 65 %: 45 % for batches, 20 % on the GPU
  x.util = 40;
  x.workers = 2;
  x.cpu_per_worker = 0.95;
  job.add(x, 120);
  for (size_t i = 0; i < job.s.size(); ++i) {
    job.s.main_thread_loader_wait[i] = job.jitter(0.45);
    job.s.main_thread_futex_wait[i] = 0.2;
    job.s.pin_memory[i] = 0;
  }
  const auto l = job.judge();
  EXPECT_EQ(l.run.wait_source, WaitSource::kSampled);
  EXPECT_NEAR(l.run.input_wait_share, 0.45, 0.02);
  EXPECT_EQ(l.run.limiter, Limiter::kInputCpu);
  // With pin_memory the loop waits on pinned batches in a futex too: the wait is given between
  // the queue's share and that plus the futex's (capped by the GPU's idle time): the middle.
  for (size_t i = 0; i < job.s.size(); ++i) job.s.pin_memory[i] = 1;
  const auto pinned = job.judge();
  EXPECT_NEAR(pinned.run.input_wait_share, (0.45 + 0.65) / 2, 0.03);
  EXPECT_LT(pinned.run.confidence, l.run.confidence);
}

TEST(Limiter, WithoutHookOrMainThreadItIsUnknown) {
  Job job;
  Job::Interval x;
  x.hook = false;
  job.add(x, 60);
  for (auto& v : job.s.main_thread_cpu) v.reset();
  const auto l = job.judge();
  EXPECT_EQ(l.run.limiter, Limiter::kUnknown);
  EXPECT_NE(describeLimiter(l.run).find("does not decide"), std::string::npos);
}

// Ten minutes GPU-bound, then ten starved by its workers: two windows of five minutes each way,
// told as two phases.
TEST(Limiter, WindowsInARowWithTheSameLimiterAreOnePhase) {
  Job job;
  job.add({}, 600);
  Job::Interval starved;
  starved.wait = 0.4;
  starved.cpu_per_worker = 0.95;
  starved.steps = 20;  // 13 steps/s against 19: slower, not a stall (under half would be)
  job.add(starved, 600);
  const auto l = job.judge();
  ASSERT_EQ(l.windows.size(), 4u);
  ASSERT_EQ(l.phases.size(), 2u);
  EXPECT_EQ(l.phases[0].limiter, Limiter::kGpu);
  EXPECT_EQ(l.phases[1].limiter, Limiter::kInputCpu);
  EXPECT_NEAR(l.phases[1].input_wait_share, 0.4, 0.02);
  EXPECT_EQ(l.phases[1].end_ms, job.s.ts_ms.back());
}

// Two ranks: rank 1's input waits, rank 0 waits in the collective (GPU busy, main thread
// spinning). The job is held by rank 1, and its wait costs both GPUs.
TEST(Limiter, TheJobIsHeldByTheRankThatWaitedMostForInput) {
  Job job;
  job.s.gpu_count = 2;
  job.add({}, 200);
  for (int32_t rank : {0, 1}) {
    model::RankSeries& r = model::addRank(job.s, rank);
    for (size_t i = 0; i < job.s.size(); ++i) {
      const double wait = rank == 1 ? 0.3 : 0.02;
      r.steps[i] = 10;
      r.data_wait_s[i] = wait;
      r.step_s[i] = 1 - wait;
      r.workers[i] = 8;
      r.workers_cpu[i] = rank == 1 ? 7.6 : 3;
      r.d_state_threads[i] = 0;
      r.gpu_util_percent[i] = rank == 1 ? 60 : 98;
      r.main_thread_cpu[i] = rank == 1 ? 0.7 : 0.99;
    }
  }
  const auto l = job.judge();
  ASSERT_EQ(l.ranks.size(), 2u);
  EXPECT_EQ(l.slowest_rank, 1);
  EXPECT_EQ(l.ranks[0].verdict.limiter, Limiter::kGpu);
  EXPECT_EQ(l.ranks[1].verdict.limiter, Limiter::kInputCpu);
  EXPECT_EQ(l.run.limiter, Limiter::kInputCpu);
  EXPECT_DOUBLE_EQ(l.run.gpus, 2);
  EXPECT_NEAR(l.run.input_wait_gpu_seconds, 0.3 * 200 * 2, 10);
}

// An acute stall is the incident's account, not the standing verdict's: a 20 s disk stall in a
// GPU-bound job leaves it gpu-bound, judged over the time outside the incident.
TEST(Limiter, IncidentsAreLeftToTheirOwnAccount) {
  Job job;
  job.add({}, 100);
  Job::Interval stalled;
  stalled.steps = 1;
  stalled.wait = 0.95;
  stalled.d_per_worker = 1;
  stalled.r_await = 80;
  stalled.aqu = 8;
  job.add(stalled, 20);
  job.add({}, 100);
  const Analysis a = analyzeJob(job.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto l = analyzeLimits(job.s, a);
  EXPECT_EQ(l.run.limiter, Limiter::kGpu);
  EXPECT_NEAR(l.run.seconds, 200, 3);
}

// A job starved from 3 s after its first step, before its baseline was warm (10 healthy
// intervals): the post-mortem finds the stall at its true start, judging those intervals
// against the job's later ones.
TEST(EarlyStall, AStallBeforeTheBaselineIsWarmIsFoundAtItsStart) {
  Job job;
  job.add({}, 3);
  Job::Interval hung;
  hung.steps = 0.5;
  hung.wait = 0.97;
  job.add(hung, 12);
  job.add({}, 120);
  const Analysis a = analyzeJob(job.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].first, 3u);
  EXPECT_EQ(a.incidents[0].last, 14u);
  EXPECT_TRUE(a.baseline[3].has_value());  // the lost time is counted against the later pace
  EXPECT_GT(a.incidents[0].gpu_seconds_lost, 10);
}

// A slow first interval (a job starts mid-interval, cuDNN picks its kernels) is no stall: the
// forward verdict stands, as the live correlator reaches it.
TEST(EarlyStall, AShortSlowStartIsNotAStallAndLeavesTheBaselineAlone) {
  Job job;
  Job::Interval first;
  first.steps = 4;
  job.add(first, 1);
  job.add({}, 120);
  const Analysis a = analyzeJob(job.s);
  EXPECT_TRUE(a.incidents.empty());
  EXPECT_FALSE(a.stalled[0]);  // not even a blip: judged forward, it is part of the baseline
}

}  // namespace
}  // namespace stallwatch::correlator

namespace stallwatch::model {
namespace {

// The figures' one table: a name each, none twice, and the name every output gives a figure
// built from its kind, subject and note.
TEST(LimiterFigures, EachKindHasItsOwnNameAndTheNameIsComposed) {
  std::set<std::string> names;
  for (int k = 0; k < kFigureKindCount; ++k) {
    const std::string name = toString(static_cast<FigureKind>(k));
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
  }
  EXPECT_EQ((LimiterFigure{FigureKind::kReadAwaitMs, 2.5, false, "vda", ""}).name(),
            "r_await_ms vda");
  EXPECT_EQ((LimiterFigure{FigureKind::kInputWaitShare, 0.4, true, "", "(dataloader hook)"}).name(),
            "input_wait_share (dataloader hook)");
  EXPECT_STREQ(unitOf(FigureKind::kDeviceReadBytesPerS), "bytes/s");
}

}  // namespace
}  // namespace stallwatch::model
