#include "correlator/stall_detector.h"

#include <gtest/gtest.h>

#include <random>

#include "correlator/wait_channel.h"
#include "storage/incident_store.h"

namespace stallwatch::correlator {
namespace {

constexpr size_t kIntervals = 300;
constexpr size_t kStallFirst = 150;
constexpr size_t kStallLast = 179;

// A healthy, noisy job: one GPU at 55-80 % with bursts, reading through loop1 (an image on
// vda), on a host that also has sdb, which the job never touches.
struct Scenario {
  JobSeries s;
  std::mt19937 rng{42};

  double noise(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

  // A GPU job that does not report steps unless REPORTS_STEPS: steps, where reported, are
  // its progress signal.
  explicit Scenario(unsigned seed = 42, bool reports_steps = false) : rng(seed) {
    s.gpu_count = 1;
    auto named = [](const char* name, const char* via, bool job_reads) {
      DeviceSeries d;
      d.name = name;
      d.via = via;
      d.job_reads = job_reads;
      return d;
    };
    DeviceSeries loop1 = named("loop1", "", true);
    DeviceSeries vda = named("vda", "loop1", true);
    DeviceSeries sdb = named("sdb", "", false);
    for (size_t i = 0; i < kIntervals; ++i) {
      s.ts_ms.push_back(1'000'000 + static_cast<int64_t>(i) * 1000);
      s.interval_s.push_back(1.0);
      double util = noise(55, 80);
      if (i % 37 == 0) util = 97;  // bursts
      if (i % 53 == 0) util = 35;  // a one-second dip now and then
      s.gpu_util_percent.push_back(util);
      s.steps.push_back(reports_steps ? std::optional<double>(noise(9, 11)) : std::nullopt);
      s.read_bytes_per_s.push_back(noise(90e6, 110e6));
      s.write_bytes_per_s.push_back(noise(0.5e6, 2e6));
      s.workers_cpu.push_back(noise(1.0, 1.3));
      s.d_state_threads.push_back(i % 7 == 0 ? 1.0 : 0.0);
      s.io_some.push_back(noise(0.0, 0.03));
      s.cpu_some.push_back(noise(0.0, 0.05));
      loop1.r_await_ms.push_back(noise(0.2, 0.4));
      loop1.w_await_ms.push_back(std::nullopt);
      loop1.aqu_sz.push_back(noise(0.3, 0.8));
      vda.r_await_ms.push_back(noise(0.4, 0.7));
      vda.w_await_ms.push_back(noise(0.5, 1.0));
      vda.aqu_sz.push_back(noise(0.5, 1.0));
      sdb.r_await_ms.push_back(noise(4, 6));
      sdb.w_await_ms.push_back(std::nullopt);
      sdb.aqu_sz.push_back(noise(0.1, 0.3));
    }
    s.devices = {loop1, vda, sdb};
  }

  DeviceSeries& device(const std::string& name) {
    for (auto& d : s.devices) {
      if (d.name == name) return d;
    }
    throw std::runtime_error(name);
  }

  // The GPU goes idle over the stall window.
  Scenario& gpuIdle() {
    for (size_t i = kStallFirst; i <= kStallLast; ++i) s.gpu_util_percent[i] = noise(0, 6);
    return *this;
  }
  template <typename Fn>
  Scenario& during(Fn fn) {
    for (size_t i = kStallFirst; i <= kStallLast; ++i) fn(i);
    return *this;
  }
};

void expectOneIncident(const Analysis& a, StallClass cls, const std::string& device = "",
                       const std::string& physical = "") {
  ASSERT_EQ(a.incidents.size(), 1u) << "incidents found";
  const Incident& inc = a.incidents[0];
  EXPECT_EQ(toString(inc.cls), std::string(toString(cls)));
  EXPECT_EQ(inc.device, device);
  EXPECT_EQ(inc.physical_device, physical);
  EXPECT_LE(inc.first > kStallFirst ? inc.first - kStallFirst : kStallFirst - inc.first, 1u);
  EXPECT_LE(inc.last > kStallLast ? inc.last - kStallLast : kStallLast - inc.last, 1u);
  EXPECT_GT(inc.idle_share, 0.8);
  EXPECT_GT(inc.confidence, 0.5);
}

TEST(StallDetector, HealthyNoisyJobHasNoIncident) {
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    Scenario sc(seed);
    const Analysis a = analyzeJob(sc.s);
    EXPECT_TRUE(a.incidents.empty()) << "seed " << seed << ": " << a.incidents.size();
    EXPECT_STREQ(model::toString(a.progress_signal), "gpu_util");
  }
}

// A job judged by its steps sends none for 30 s. While its workers keep computing and reading
// (an evaluation), that is a phase outside its loop, not a stall; while they stop (a hang), or
// read next to nothing (a starved loop), it stays a stall.
TEST(StallDetector, NoStepsWhileTheWorkersWorkIsAPhaseNotAStall) {
  Scenario eval(42, /*reports_steps=*/true);
  eval.during([&](size_t i) {
    eval.s.steps[i] = std::nullopt;
    eval.s.gpu_util_percent[i] = eval.noise(10, 20);
    eval.s.read_bytes_per_s[i] = eval.noise(70e6, 90e6);
  });
  Analysis a = analyzeJob(eval.s);
  EXPECT_TRUE(a.incidents.empty());
  ASSERT_EQ(a.outside_loop.size(), 1u);
  EXPECT_GT(a.outside_loop[0].workers_cpu, 1.0);
  EXPECT_LT(*a.outside_loop[0].gpu_share, 0.4);
  EXPECT_EQ(a.gpu_seconds_lost[static_cast<int>(StallClass::kNotStorage)], 0.0);

  // The evaluation's loader starting puts a thread in D: still a phase, not io-throttled.
  Scenario waits(42, true);
  waits.s.d_state_wchan.resize(waits.s.size());
  waits.during([&](size_t i) {
    waits.s.steps[i] = std::nullopt;
    waits.s.gpu_util_percent[i] = waits.noise(10, 20);
    waits.s.read_bytes_per_s[i] = waits.noise(70e6, 90e6);
    waits.s.d_state_threads[i] = 1;
    waits.s.d_state_wchan[i] = "blk_mq_get_tag";
  });
  a = analyzeJob(waits.s);
  EXPECT_TRUE(a.incidents.empty());
  EXPECT_EQ(a.outside_loop.size(), 1u);
  // Reading at the io.max limit of its cgroup, though, the limit explains the silence.
  Scenario limited(42, true);
  limited.s.cgroup_limited_read_bytes_per_s.resize(limited.s.size());
  limited.s.cgroup_read_limit_bytes_per_s.resize(limited.s.size());
  limited.during([&](size_t i) {
    limited.s.steps[i] = std::nullopt;
    limited.s.read_bytes_per_s[i] = 40e6;
    limited.s.cgroup_limited_read_bytes_per_s[i] = 40e6;
    limited.s.cgroup_read_limit_bytes_per_s[i] = 41.9e6;
  });
  for (size_t i = 0; i < limited.s.size(); ++i) {
    if (!limited.s.cgroup_read_limit_bytes_per_s[i]) {
      limited.s.cgroup_read_limit_bytes_per_s[i] = 41.9e6;
      limited.s.cgroup_limited_read_bytes_per_s[i] = limited.s.read_bytes_per_s[i].value_or(0) / 3;
    }
  }
  a = analyzeJob(limited.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_STREQ(toString(a.incidents[0].cls), "io-throttled");
  EXPECT_TRUE(a.outside_loop.empty());

  Scenario hang(42, true);
  hang.during([&](size_t i) {
    hang.s.steps[i] = std::nullopt;
    hang.s.workers_cpu[i] = 0.01;
    hang.s.read_bytes_per_s[i] = 0;
    hang.s.d_state_threads[i] = 0;
  });
  hang.s.sleep_wchan.resize(hang.s.size());
  for (size_t i = kStallFirst; i <= kStallLast; ++i) hang.s.sleep_wchan[i] = "futex_do_wait";
  a = analyzeJob(hang.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_TRUE(a.outside_loop.empty());
  // A hang says what its processes wait on.
  const auto& ev = a.incidents[0].evidence;
  const auto idle = std::find_if(ev.begin(), ev.end(), [](const model::EvidenceItem& e) {
    return e.signal.rfind("job_processes_idle", 0) == 0;
  });
  ASSERT_NE(idle, ev.end());
  EXPECT_EQ(idle->signal,
            "job_processes_idle asleep in futex_do_wait (lock or condition variable)");
  EXPECT_TRUE(idle->supports);
  EXPECT_GT(idle->during, 0.9);
  EXPECT_EQ(idle->baseline, 0.0);

  Scenario starved(42, true);
  starved.during([&](size_t i) {
    starved.s.steps[i] = std::nullopt;
    starved.s.read_bytes_per_s[i] = 4e6;  // a throttled disk: the workers spin on little data
  });
  a = analyzeJob(starved.s);
  EXPECT_EQ(a.incidents.size(), 1u);
  EXPECT_TRUE(a.outside_loop.empty());
}

// Issue 48: a job's exit. Its last progress at interval 239; then its GPU idles while its
// processes wind down until they exit: the workers finish the batches they had (busy and
// reading for 4 s), then sit idle while they are joined. HANG: what holds it instead.
enum class EndHang { kNone, kStopped, kStuckInD };
JobSeries exitingJob(bool hang_mid_run, EndHang at_end) {
  Scenario sc;
  JobSeries& s = sc.s;
  const size_t n = s.size();
  s.stopped_processes.assign(n, 0.0);
  s.main_cpu.assign(n, 0.9);
  if (hang_mid_run) {  // its workers stopped (SIGSTOP) mid-run, then continued
    sc.gpuIdle().during([&](size_t i) {
      s.stopped_processes[i] = 12;
      s.workers_cpu[i] = 0;
      s.read_bytes_per_s[i] = 0;
      s.main_cpu[i] = 0;
    });
  }
  for (size_t i = 240; i < n; ++i) {
    const bool finishing = i < 244;
    s.gpu_util_percent[i] = i % 5 == 0 ? std::nullopt : std::optional<double>(sc.noise(0, 3));
    s.workers_cpu[i] = finishing ? 1.2 : 0.0;
    s.read_bytes_per_s[i] = finishing ? 100e6 : 0.0;
    s.write_bytes_per_s[i] = 0;
    s.main_cpu[i] = finishing ? 0.5 : 0.01;
    s.d_state_threads[i] = at_end == EndHang::kStuckInD && !finishing ? 2.0 : 0.0;
    s.stopped_processes[i] = at_end == EndHang::kStopped && !finishing ? 12.0 : 0.0;
  }
  // The last intervals have no GPU reading at all: the job let go of its GPU before its
  // processes were gone.
  for (size_t i = n - 3; i < n; ++i) s.gpu_util_percent[i] = std::nullopt;
  s.ended_ms = s.ts_ms.back() + 2000;
  return s;
}

TEST(StallDetector, AJobsExitIsNeitherAStallNorLostTime) {
  const Analysis a = analyzeJob(exitingJob(false, EndHang::kNone));
  EXPECT_TRUE(a.incidents.empty()) << toString(a.incidents[0].cls);
  ASSERT_TRUE(a.idle_at_exit.has_value());
  EXPECT_NEAR(static_cast<double>(a.idle_at_exit->start_ms), 1'000'000 + 239'000, 1000);
  EXPECT_EQ(a.idle_at_exit->end_ms, 1'000'000 + 299'000);
  for (double lost : a.gpu_seconds_lost) EXPECT_DOUBLE_EQ(lost, 0.0);
}

TEST(StallDetector, AJobsExitAfterAHangIsStillItsExit) {
  const Analysis a = analyzeJob(exitingJob(true, EndHang::kNone));
  ASSERT_EQ(a.incidents.size(), 1u);  // the hang, and only the hang
  EXPECT_EQ(a.incidents[0].last, kStallLast);
  EXPECT_TRUE(a.idle_at_exit.has_value());
}

TEST(StallDetector, AJobThatHangsAtItsEndIsAStall) {
  for (EndHang hang : {EndHang::kStopped, EndHang::kStuckInD}) {
    const Analysis a = analyzeJob(exitingJob(false, hang));
    ASSERT_EQ(a.incidents.size(), 1u) << static_cast<int>(hang);
    EXPECT_GE(a.incidents[0].first, 239u);
    EXPECT_FALSE(a.idle_at_exit.has_value());
  }
  // ... and so does an end longer than the live side holds such a stall before paging it.
  DetectorConfig cfg;
  cfg.exit_hold_s = 30;
  const Analysis a = analyzeJob(exitingJob(false, EndHang::kNone), cfg);
  EXPECT_EQ(a.incidents.size(), 1u);
  EXPECT_FALSE(a.idle_at_exit.has_value());
}

TEST(StallDetector, DiskSlowNamesTheLoopDeviceAndTheDiskUnder) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.device("loop1").r_await_ms[i] = sc.noise(15, 40);
    sc.device("loop1").aqu_sz[i] = sc.noise(6, 12);
    sc.device("vda").r_await_ms[i] = sc.noise(20, 50);
    sc.s.read_bytes_per_s[i] = sc.noise(5e6, 10e6);
  });
  const Analysis a = analyzeJob(sc.s);
  expectOneIncident(a, StallClass::kDiskSlow, "loop1", "vda");
  EXPECT_NEAR(a.incidents[0].gpu_seconds_lost, 30 * 0.65, 30 * 0.15);  // ~65 points for 30 s
}

TEST(StallDetector, HungDiskWithNoCompletionsIsSeenByItsQueue) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.device("loop1").r_await_ms[i] = std::nullopt;  // nothing completed: no await at all
    sc.device("loop1").aqu_sz[i] = 16;
  });
  expectOneIncident(analyzeJob(sc.s), StallClass::kDiskSlow, "loop1", "vda");
}

TEST(StallDetector, IoThrottledWhenPressureRisesButDevicesAnswerNormally) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.s.io_some[i] = sc.noise(0.5, 0.8);
    sc.s.d_state_threads[i] = 4;
    sc.s.read_bytes_per_s[i] = 10e6;
  });
  expectOneIncident(analyzeJob(sc.s), StallClass::kIoThrottled);
}

// Where the job's D-state threads waited is named with the count: an NFS server that holds
// them shows as RPC waits.
TEST(StallDetector, TheWaitOfDStateThreadsIsNamedWithItsSubsystem) {
  Scenario sc;
  sc.s.d_state_wchan.assign(sc.s.size(), "");
  sc.gpuIdle().during([&](size_t i) {
    sc.s.io_some[i] = sc.noise(0.5, 0.8);
    sc.s.d_state_threads[i] = 12;
    sc.s.d_state_wchan[i] = i % 5 == 0 ? "io_schedule" : "rpc_wait_bit_killable";
  });
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& evidence = a.incidents[0].evidence;
  EXPECT_TRUE(std::any_of(evidence.begin(), evidence.end(), [](const auto& e) {
    return e.signal == "job_d_state_threads waiting in rpc_wait_bit_killable (NFS/RPC)" &&
           e.during == 12 && e.supports;
  }));
}

// A torch.save and a sync: a few GB in the interval the GPUs go idle, then threads waiting for
// writeback while little is written. The median write rate over the stall misses it; the peak
// and the waits do not.
TEST(StallDetector, ACheckpointIsItsBurstThenItsWritebackWait) {
  for (const bool waits : {true, false}) {
    Scenario sc;
    sc.s.d_state_wchan.assign(sc.s.size(), "");
    sc.gpuIdle().during([&](size_t i) {
      sc.s.write_bytes_per_s[i] = i == kStallFirst ? (waits ? 2.5e9 : 1.5e8) : 1e6;
      sc.s.d_state_threads[i] = waits ? 3 : 0;
      sc.s.d_state_wchan[i] = waits ? "wb_wait_for_completion" : "";
      sc.device("loop1").w_await_ms[i] = 3.0;  // the checkpoint's writes land on loop1
    });
    const Analysis a = analyzeJob(sc.s);
    ASSERT_EQ(a.incidents.size(), 1u);
    if (waits) {
      EXPECT_EQ(a.incidents[0].cls, StallClass::kCheckpoint);
      EXPECT_EQ(a.incidents[0].device, "loop1");  // the job's device with writes during it
      const auto& ev = a.incidents[0].evidence;
      EXPECT_TRUE(std::any_of(ev.begin(), ev.end(), [](const auto& e) {
        return e.signal == "job_write_bytes_per_s peak (then waiting for writeback)" &&
               e.supports && e.during == 2.5e9;
      }));
    } else {  // 150 MB once, nothing waiting: not enough to call it a checkpoint
      EXPECT_NE(a.incidents[0].cls, StallClass::kCheckpoint);
    }
  }
}

TEST(WaitChannel, KernelFunctionsMapToTheirSubsystem) {
  const std::pair<const char*, const char*> cases[] = {
      {"request_wait_answer", "FUSE"},
      {"fuse_wait_on_page_writeback", "FUSE"},
      {"rpc_wait_bit_killable", "NFS/RPC"},
      {"nfs_wait_on_request", "NFS/RPC"},
      {"wb_wait_for_completion", "writeback"},
      {"folio_wait_writeback", "writeback"},
      {"balance_dirty_pages", "writeback"},
      {"jbd2_log_wait_commit", "journal"},
      {"xlog_wait_on_iclog", "journal"},
      {"folio_wait_bit_common", "block I/O"},
      {"io_schedule", "block I/O"},
      {"__iomap_dio_rw", "block I/O"},
      {"blk_mq_get_tag", "block I/O"},
      {"shrink_folio_list", "memory reclaim"},
      // Where an idle main thread sleeps (S): named from the kernels seen (5.15, 6.1, 6.8).
      {"do_sys_poll", "poll on files, pipes or sockets"},
      {"do_epoll_wait", "poll on files, pipes or sockets"},
      {"futex_wait_queue", "lock or condition variable"},
      {"futex_do_wait", "lock or condition variable"},
      {"pipe_read", "pipe"},
      {"anon_pipe_read", "pipe"},
      {"unix_stream_read_generic", "socket"},
      {"do_wait", "a child process to exit"},
      {"hrtimer_nanosleep", "timer"},
      {"worker_thread", ""},  // unknown: left unclassified, not guessed
      {"", ""},
  };
  for (const auto& [wchan, subsystem] : cases) {
    EXPECT_STREQ(correlator::waitSubsystem(wchan), subsystem) << wchan;
  }
  EXPECT_EQ(correlator::mostCommonText({"", "a", "b", "b", ""}), "b");
  EXPECT_EQ(correlator::mostCommonText({"", ""}), "");
}

TEST(StallDetector, InputCpuWhenCpuPressureRisesAndStorageIsHealthy) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.s.cpu_some[i] = sc.noise(0.6, 0.9);
    sc.s.workers_cpu[i] = 1.0;
  });
  expectOneIncident(analyzeJob(sc.s), StallClass::kInputCpu);
}

TEST(StallDetector, CheckpointWhenTheJobsOwnWritesCoincide) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.s.write_bytes_per_s[i] = sc.noise(600e6, 900e6);
    sc.device("vda").w_await_ms[i] = sc.noise(20, 40);  // the checkpoint loads the disk
    sc.device("vda").aqu_sz[i] = 20;
  });
  expectOneIncident(analyzeJob(sc.s), StallClass::kCheckpoint);
}

TEST(StallDetector, NotStorageWhenNothingExplainsTheIdleGpu) {
  Scenario sc;
  sc.gpuIdle();
  const Analysis a = analyzeJob(sc.s);
  expectOneIncident(a, StallClass::kNotStorage);
  EXPECT_FALSE(a.incidents[0].evidence.empty());
}

// Confounders: each must not produce the wrong blame.
TEST(StallDetector, ASlowDiskTheJobDoesNotReadIsNotBlamed) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) {
    sc.device("sdb").r_await_ms[i] = sc.noise(200, 400);
    sc.device("sdb").aqu_sz[i] = 30;
  });
  const Analysis a = analyzeJob(sc.s);
  expectOneIncident(a, StallClass::kNotStorage);
  bool shown = false;
  for (const auto& e : a.incidents[0].evidence) {
    if (e.signal.find("sdb") != std::string::npos) {
      shown = true;
      EXPECT_FALSE(e.supports);
    }
  }
  EXPECT_TRUE(shown) << "the unrelated disk's spike should be in the evidence, marked as not read";
}

TEST(StallDetector, IoPressureWithoutDeviceLatencyIsNotDiskSlow) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) { sc.s.io_some[i] = 0.7; });
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_NE(a.incidents[0].cls, StallClass::kDiskSlow);
  EXPECT_EQ(a.incidents[0].device, "");
}

TEST(StallDetector, CheckpointOnAHealthyDiskIsNotDiskSlow) {
  Scenario sc;
  sc.gpuIdle().during([&](size_t i) { sc.s.write_bytes_per_s[i] = 500e6; });
  const Analysis a = analyzeJob(sc.s);
  expectOneIncident(a, StallClass::kCheckpoint);
}

TEST(StallDetector, ASlowDiskWhileTheGpuStaysBusyIsNoIncident) {
  Scenario sc;
  sc.during([&](size_t i) { sc.device("loop1").r_await_ms[i] = 50; });
  EXPECT_TRUE(analyzeJob(sc.s).incidents.empty());
}

TEST(StallDetector, ShortStallsAreCountedAsBlips) {
  Scenario sc;
  for (size_t i = 100; i < 103; ++i) sc.s.gpu_util_percent[i] = 1;
  const Analysis a = analyzeJob(sc.s);
  EXPECT_TRUE(a.incidents.empty());
  EXPECT_GE(a.blips, 1u);
}

TEST(StallDetector, ALongStallDoesNotBecomeTheBaseline) {
  Scenario sc;
  for (size_t i = 100; i < kIntervals; ++i) sc.s.gpu_util_percent[i] = 2;  // 200 s > window
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].first, 100u);
  EXPECT_EQ(a.incidents[0].last, kIntervals - 1);
}

TEST(StallDetector, JobsWithoutGpusAreJudgedByTheirSteps) {
  Scenario sc(42, true);
  sc.s.gpu_count = 0;
  sc.during([&](size_t i) {
    sc.s.steps[i] = std::nullopt;  // a blocked loop sends nothing
    sc.device("loop1").r_await_ms[i] = 30;
  });
  const Analysis a = analyzeJob(sc.s);
  EXPECT_STREQ(model::toString(a.progress_signal), "steps");
  expectOneIncident(a, StallClass::kDiskSlow, "loop1", "vda");
}

// A synchronous two-rank job (DDP): each rank's GPU at 55-75 % when healthy. When rank
// STARVED waits for its data, its GPU idles while the other rank's spins at ~99 % inside the
// all-reduce that waits for it; the job's mean utilisation stays near 50 %.
Scenario twoRanks(std::optional<int32_t> starved, bool with_activity, bool with_waits) {
  Scenario sc;
  sc.s.gpu_count = 2;
  for (int32_t r = 0; r < 2; ++r) {
    RankSeries rank;
    rank.rank = r;
    rank.pid = 1000 + static_cast<uint32_t>(r);
    rank.gpu = "GPU-" + std::to_string(r);
    for (size_t i = 0; i < kIntervals; ++i) {
      const bool stalled = i >= kStallFirst && i <= kStallLast;
      const bool starving = stalled && (!starved || *starved == r);
      const double util = starving  ? sc.noise(0, 7)
                          : stalled ? sc.noise(97, 100)
                                    : sc.noise(55, 75);
      rank.gpu_util_percent.push_back(util);
      rank.gpu_work_percent.push_back(with_activity
                                          ? std::optional<double>(starving  ? sc.noise(0, 1)
                                                                  : stalled ? sc.noise(2, 4)
                                                                            : sc.noise(40, 60))
                                          : std::nullopt);
      rank.data_wait_s.push_back(
          with_waits ? std::optional<double>(starving ? sc.noise(0.85, 1.0) : sc.noise(0.0, 0.05))
                     : std::nullopt);
      rank.steps.push_back(with_waits ? std::optional<double>(stalled ? 1.0 : sc.noise(14, 16))
                                      : std::nullopt);
      rank.read_bytes_per_s.push_back(starving ? sc.noise(3e6, 5e6) : sc.noise(40e6, 60e6));
      rank.write_bytes_per_s.push_back(0.0);
      rank.workers_cpu.push_back(sc.noise(0.5, 0.6));
      rank.d_state_threads.push_back(starving ? 6.0 : 0.0);
    }
    sc.s.ranks.push_back(std::move(rank));
  }
  for (size_t i = 0; i < kIntervals; ++i) {
    double util = 0, active = 0, steps = 0;
    for (const auto& r : sc.s.ranks) {
      util += *r.gpu_util_percent[i] / 2;
      active += r.gpu_work_percent[i].value_or(0) / 2;
      steps += r.steps[i].value_or(0);
    }
    sc.s.gpu_util_percent[i] = util;
    sc.s.gpu_work_percent.push_back(with_activity ? std::optional<double>(active) : std::nullopt);
    sc.s.steps[i] = with_waits ? std::optional<double>(steps) : std::nullopt;
    // The starved rank's reads queue on loop1.
    if (i >= kStallFirst && i <= kStallLast) {
      sc.device("loop1").r_await_ms[i] = sc.noise(30, 60);
      sc.device("loop1").aqu_sz[i] = sc.noise(4, 8);
    }
  }
  return sc;
}

TEST(StallDetector, OneStarvedRankStallsTheJobAndIsNamed) {
  for (bool activity : {false, true}) {
    for (bool waits : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "GPM " << activity << ", data wait " << waits);
      Scenario sc = twoRanks(1, activity, waits);
      // The mean over the job's GPUs alone never looks stalled: ~50 % against ~65 %.
      const Analysis a = analyzeJob(sc.s);
      EXPECT_STREQ(model::toString(a.progress_signal), waits      ? "steps"
                                                       : activity ? "gpu_work"
                                                                  : "gpu_util_slowest_rank");
      expectOneIncident(a, StallClass::kDiskSlow, "loop1", "vda");
      const Incident& inc = a.incidents[0];
      ASSERT_TRUE(inc.straggler.has_value());
      EXPECT_EQ(inc.straggler->rank, 1);
      EXPECT_EQ(inc.straggler->pid, 1001u);
      EXPECT_EQ(inc.straggler->gpu, "GPU-1");
      EXPECT_EQ(inc.waiting_ranks, std::vector<int32_t>{0});
      EXPECT_TRUE(inc.ranks_starved.empty());
    }
  }
}

// A starving rank's loop is blocked in next(): it reports its wait only when the batch comes.
// With no wait figures during the stall, the GPUs' idling still names the straggler.
TEST(StallDetector, AStragglerThatReportsNothingWhileBlockedIsStillNamed) {
  Scenario sc = twoRanks(1, true, true);
  for (auto& r : sc.s.ranks) {
    for (size_t i = kStallFirst; i <= kStallLast; ++i) r.data_wait_s[i] = std::nullopt;
  }
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  ASSERT_TRUE(a.incidents[0].straggler.has_value());
  EXPECT_EQ(a.incidents[0].straggler->rank, 1);
}

TEST(StallDetector, TheOtherRankStarvingIsNamedInstead) {
  const Analysis a = analyzeJob(twoRanks(0, false, false).s);
  ASSERT_EQ(a.incidents.size(), 1u);
  ASSERT_TRUE(a.incidents[0].straggler.has_value());
  EXPECT_EQ(a.incidents[0].straggler->rank, 0);
  EXPECT_EQ(a.incidents[0].waiting_ranks, std::vector<int32_t>{1});
}

TEST(StallDetector, EveryRankStarvingAlikeHasNoStraggler) {
  for (bool waits : {false, true}) {
    const Analysis a = analyzeJob(twoRanks(std::nullopt, true, waits).s);
    ASSERT_EQ(a.incidents.size(), 1u) << "waits " << waits;
    const Incident& inc = a.incidents[0];
    EXPECT_EQ(toString(inc.cls), std::string("disk-slow"));
    EXPECT_FALSE(inc.straggler.has_value());
    EXPECT_EQ(inc.ranks_starved, (std::vector<int32_t>{0, 1}));
  }
}

TEST(StallDetector, HealthyTwoRankJobHasNoIncident) {
  Scenario sc = twoRanks(1, true, true);
  // Undo the stall: both ranks healthy throughout.
  const Scenario healthy = twoRanks(1, true, true);
  for (auto* s : {&sc.s}) {
    for (auto& r : s->ranks) {
      for (size_t i = kStallFirst; i <= kStallLast; ++i) {
        r.gpu_util_percent[i] = r.gpu_util_percent[i - 40];
        r.gpu_work_percent[i] = r.gpu_work_percent[i - 40];
        r.data_wait_s[i] = r.data_wait_s[i - 40];
        r.steps[i] = r.steps[i - 40];
      }
    }
    for (size_t i = kStallFirst; i <= kStallLast; ++i) {
      s->gpu_work_percent[i] = s->gpu_work_percent[i - 40];
      s->steps[i] = s->steps[i - 40];
    }
  }
  EXPECT_TRUE(analyzeJob(sc.s).incidents.empty());
  EXPECT_EQ(analyzeJob(healthy.s).incidents.size(), 1u);
}

TEST(StallDetector, NothingToJudgeByGivesNoVerdict) {
  JobSeries s;
  s.ts_ms = {1000, 2000};
  s.interval_s = {1, 1};
  const Analysis a = analyzeJob(s);
  EXPECT_TRUE(a.incidents.empty());
  EXPECT_STREQ(model::toString(a.progress_signal), "");
}

// Per I/O (the eBPF collector): one read in fifty held for 120 ms moves loop1's average by
// ~2 ms and its queue little, so the interval figures stay under their thresholds; the 99th
// percentile of the job's own reads does not, and names the device (issue 33).
struct TailScenario : Scenario {
  explicit TailScenario(double job_p99_during_ms, double others_share_during = 0.1) {
    DeviceSeries& loop1 = device("loop1");
    for (size_t i = 0; i < kIntervals; ++i) {
      loop1.job_read_p99_ms.push_back(noise(0.5, 0.9));
      loop1.others_read_p99_ms.push_back(noise(0.4, 0.8));
      loop1.job_reads_per_s.push_back(noise(900, 1100));
      loop1.others_reads_per_s.push_back(noise(90, 120));
    }
    gpuIdle().during([&](size_t i) {
      loop1.job_read_p99_ms[i] = noise(0.9, 1.1) * job_p99_during_ms;
      loop1.r_await_ms[i] = noise(1.8, 2.6);  // under 3x its floored 1 ms baseline
      const double total = noise(500, 600);
      loop1.job_reads_per_s[i] = total * (1 - others_share_during);
      loop1.others_reads_per_s[i] = total * others_share_during;
      s.io_some[i] = noise(0.3, 0.5);  // the job's readers waiting: io-throttled without the tail
      s.read_bytes_per_s[i] = 40e6;
    });
  }
};

const EvidenceItem* findEvidence(const Incident& inc, const std::string& signal) {
  for (const auto& e : inc.evidence) {
    if (e.signal == signal) return &e;
  }
  return nullptr;
}

TEST(StallDetector, TheTailOfTheJobsReadsIsDiskSlowWhileTheAverageHolds) {
  TailScenario sc(120);
  const Analysis a = analyzeJob(sc.s);
  expectOneIncident(a, StallClass::kDiskSlow, "loop1", "vda");
  const Incident& inc = a.incidents[0];
  const EvidenceItem* tail = findEvidence(inc, "read_p99_ms loop1 (the job's I/Os)");
  ASSERT_TRUE(tail);
  EXPECT_TRUE(tail->supports);
  EXPECT_NEAR(tail->during, 120, 15);
  EXPECT_LT(tail->baseline, 1);
  const EvidenceItem* others = findEvidence(inc, "read_p99_ms loop1 (others' I/Os)");
  ASSERT_TRUE(others);
  EXPECT_FALSE(others->supports);  // the neighbours' reads answered as before
  const EvidenceItem* await = findEvidence(inc, "await_ms loop1");
  ASSERT_TRUE(await);
  EXPECT_FALSE(await->supports);  // the interval average alone would not have said it
  // Typed as well as said (issue 42, 45): what was measured, of what, in what unit.
  EXPECT_EQ(tail->name.metric, model::EvidenceMetric::kJobReadP99Ms);
  EXPECT_EQ(tail->name.scope, model::EvidenceScope::kDevice);
  EXPECT_EQ(tail->name.subject, "loop1");
  EXPECT_EQ(tail->name.remark(), "(the job's I/Os)");
  EXPECT_STREQ(model::unitOf(tail->name.metric), "ms");
  EXPECT_EQ(model::displayName(tail->name), tail->signal);
  EXPECT_EQ(others->name.metric, model::EvidenceMetric::kOthersReadP99Ms);
}

// A recording from before the typed names: each shape this project wrote gets its kind back
// where it is loaded, and says the same signal again.
TEST(EvidenceNames, OlderRecordingsSignalsGetTheirTypedNames) {
  using M = model::EvidenceMetric;
  using S = model::EvidenceScope;
  struct Case {
    const char* signal;
    model::EvidenceName name;
  };
  const Case cases[] = {
      {"await_ms loop0", {M::kAwaitMs, S::kDevice, "loop0", ""}},
      {"await_ms vdb (the job does not read it)",
       {M::kAwaitMs, S::kDevice, "vdb", "(the job does not read it)"}},
      {"gpu_util_percent rank 1", {M::kGpuUtilPercent, S::kRank, "1", ""}},
      {"data_wait_share node gpu-02", {M::kDataWaitShare, S::kNode, "gpu-02", ""}},
      {"io_some", {M::kIoSome, S::kHost, "", ""}},
      {"io_some (the job's cgroup)", {M::kIoSome, S::kCgroup, "", "(the job's cgroup)"}},
      {"job_d_state_threads", {M::kJobDStateThreads, S::kJob, "", ""}},
      {"neighbour_bytes_per_s vda /stallwatch/neighbour",
       {M::kNeighbourBytesPerS, S::kDevice, "vda", "/stallwatch/neighbour"}},
      {"read_p99_ms loop1 (others' I/Os)", {M::kOthersReadP99Ms, S::kDevice, "loop1", ""}},
      {"read_p99_ms loop1 (the job's I/Os)", {M::kJobReadP99Ms, S::kDevice, "loop1", ""}},
      {"main_process_asleep in futex_do_wait (lock or condition variable)",
       {M::kMainProcessAsleep, S::kProcess, "", "in futex_do_wait (lock or condition variable)"}},
      {"checkpoint_slowed_by await_ms vdb", {M::kCheckpointSlowedByAwaitMs, S::kDevice, "vdb", ""}},
      // A name this version does not know: its signal alone says it.
      {"frobnication_ms vdb", {M::kUnknown, S::kDevice, "vdb", ""}},
  };
  for (const auto& c : cases) {
    const model::EvidenceName got = storage::legacyName(c.signal);
    EXPECT_EQ(got.metric, c.name.metric) << c.signal;
    EXPECT_EQ(got.scope, c.name.scope) << c.signal;
    EXPECT_EQ(got.subject, c.name.subject) << c.signal;
    EXPECT_EQ(got.note, c.name.note) << c.signal;
    if (got.metric != M::kUnknown && got.metric != M::kCheckpointSlowedByAwaitMs) {
      EXPECT_EQ(model::displayName(got), c.signal);
    }
  }
  // Stored with its name, read back the same; stored without (an older agent), named on reading.
  const auto item = model::evidenceItem({M::kAquSz, S::kDevice, "loop0", ""}, 0.5, 7.8, true);
  const auto back = storage::parseEvidenceJson(storage::evidenceJson({item}));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].signal, "aqu_sz loop0");
  EXPECT_EQ(back[0].name.metric, M::kAquSz);
  EXPECT_EQ(back[0].name.subject, "loop0");
  const auto old = storage::parseEvidenceJson(
      R"([{"signal": "gpu_util_percent rank 3", "baseline": 50, "during": 1, "supports": true}])");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].name.scope, S::kRank);
  EXPECT_EQ(old[0].name.subject, "3");
}

// Every kind's row: a stored name that reads back as the same kind (with its qualifier), and a
// unit. A row with a misspelt or repeated name would read back as another kind.
TEST(EvidenceNames, EveryKindReadsBackFromItsStoredName) {
  for (int k = 1; k < model::kEvidenceMetricCount; ++k) {
    const auto metric = static_cast<model::EvidenceMetric>(k);
    const std::string stored = model::toString(metric);
    ASSERT_FALSE(stored.empty()) << k;
    const model::EvidenceName back = model::evidenceNameFromStored(
        stored, "device", "vdb", std::string(model::qualifierOf(metric)) + " extra");
    EXPECT_EQ(back.metric, metric) << stored;
    EXPECT_EQ(back.note, "extra") << stored;
    EXPECT_STRNE(model::unitOf(metric), "") << stored;
  }
  const auto stored = storage::parseEvidenceJson(
      R"json([{"signal": "read_p99_ms vdb (others' I/Os)", "metric": "read_p99_ms", "scope": "device",
           "subject": "vdb", "note": "(others' I/Os)", "baseline": 1, "during": 9,
           "supports": false}])json");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].name.metric, model::EvidenceMetric::kOthersReadP99Ms);
  EXPECT_EQ(stored[0].name.note, "");
  EXPECT_EQ(model::displayName(stored[0].name), stored[0].signal);
}

TEST(StallDetector, WithoutPerIoFiguresTheSameStallIsNotBlamedOnTheDisk) {
  TailScenario sc(120);
  for (auto& d : sc.s.devices) {
    for (auto* x :
         {&d.job_read_p99_ms, &d.others_read_p99_ms, &d.job_reads_per_s, &d.others_reads_per_s})
      x->assign(kIntervals, std::nullopt);
  }
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].cls, StallClass::kIoThrottled);
  EXPECT_FALSE(findEvidence(a.incidents[0], "read_p99_ms loop1 (the job's I/Os)"));
}

TEST(StallDetector, ATailUnderItsFloorIsNoSlowDevice) {
  TailScenario sc(4);  // 0.7 -> 4 ms: within what an SSD's p99 wanders (tail_floor_ms 5, x3)
  const Analysis a = analyzeJob(sc.s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].cls, StallClass::kIoThrottled);
  const EvidenceItem* tail = findEvidence(a.incidents[0], "read_p99_ms loop1 (the job's I/Os)");
  ASSERT_TRUE(tail);
  EXPECT_FALSE(tail->supports);
}

TEST(StallDetector, ANeighboursRisingShareOfTheDevicesReadsIsNamed) {
  TailScenario quiet(120), busy(120, 0.8);
  const Analysis calm = analyzeJob(quiet.s);
  const EvidenceItem* before = findEvidence(calm.incidents.at(0), "others_share_of_reads loop1");
  ASSERT_TRUE(before);
  EXPECT_FALSE(before->supports);
  const Analysis a = analyzeJob(busy.s);
  const EvidenceItem* share = findEvidence(a.incidents.at(0), "others_share_of_reads loop1");
  ASSERT_TRUE(share);
  EXPECT_TRUE(share->supports);
  EXPECT_NEAR(share->during, 0.8, 0.02);
  EXPECT_NEAR(share->baseline, 0.1, 0.03);
}

TEST(Percentile, Interpolates) {
  const Series v = {1.0, std::nullopt, 2.0, 3.0, 4.0};
  EXPECT_DOUBLE_EQ(*percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(*percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(*percentile(v, 100), 4.0);
  EXPECT_FALSE(percentile({std::nullopt}, 50));
}

}  // namespace
}  // namespace stallwatch::correlator
