#include "correlator/stall_detector.h"

#include <gtest/gtest.h>

#include <random>

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

  explicit Scenario(unsigned seed = 42) : rng(seed) {
    s.gpu_count = 1;
    DeviceSeries loop1{"loop1", "", true, {}, {}, {}};
    DeviceSeries vda{"vda", "loop1", true, {}, {}, {}};
    DeviceSeries sdb{"sdb", "", false, {}, {}, {}};
    for (size_t i = 0; i < kIntervals; ++i) {
      s.ts_ms.push_back(1'000'000 + static_cast<int64_t>(i) * 1000);
      s.interval_s.push_back(1.0);
      double util = noise(55, 80);
      if (i % 37 == 0) util = 97;  // bursts
      if (i % 53 == 0) util = 35;  // a one-second dip now and then
      s.gpu_util_percent.push_back(util);
      s.steps.push_back(noise(9, 11));
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
    EXPECT_EQ(a.progress_signal, "gpu_util");
  }
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
  Scenario sc;
  sc.s.gpu_count = 0;
  sc.during([&](size_t i) {
    sc.s.steps[i] = std::nullopt;  // a blocked loop sends nothing
    sc.device("loop1").r_await_ms[i] = 30;
  });
  const Analysis a = analyzeJob(sc.s);
  EXPECT_EQ(a.progress_signal, "steps");
  expectOneIncident(a, StallClass::kDiskSlow, "loop1", "vda");
}

TEST(StallDetector, NothingToJudgeByGivesNoVerdict) {
  JobSeries s;
  s.ts_ms = {1000, 2000};
  s.interval_s = {1, 1};
  const Analysis a = analyzeJob(s);
  EXPECT_TRUE(a.incidents.empty());
  EXPECT_EQ(a.progress_signal, "");
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
