#include "correlator/live_correlator.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <random>

#include "storage/recording.h"
#include "test_support.h"

namespace stallwatch::correlator {
namespace {

using collectors::SampleBatch;

// One job on one GPU reading through loop1 (an image on vda); STALLED(i) says whether the
// GPU starves on a slow loop1 at interval I.
std::vector<SampleBatch> syntheticRun(size_t n, const std::function<bool(size_t)>& stalled,
                                      unsigned seed = 7) {
  std::mt19937 rng(seed);
  auto noise = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  std::vector<SampleBatch> out;
  for (size_t i = 0; i < n; ++i) {
    SampleBatch b;
    b.wall_time_ms = 1'000'000 + static_cast<int64_t>(i) * 1000;
    b.interval_seconds = 1.0;
    if (i == 0) {
      collectors::JobDescription d;
      d.key = "pid:100:1";
      d.label = "python train.py";
      d.gpus = {"GPU-a"};
      b.job_updates.push_back(d);
      b.job_devices.push_back({"pid:100:1", "loop1", 7, 1, "", 3});
      b.job_devices.push_back({"pid:100:1", "vda", 254, 0, "loop1", 3});
    }
    const bool s = stalled(i);
    collectors::JobSample j;
    j.key = "pid:100:1";
    j.gpus = {"GPU-a"};
    j.gpu_util_percent = s ? noise(0, 5) : noise(60, 80);
    j.read_bytes_per_second = s ? 5e6 : 100e6;
    j.write_bytes_per_second = 1e6;
    b.jobs.push_back(j);
    collectors::DiskSample loop1;
    loop1.device = "loop1";
    loop1.rates.r_await_ms = s ? noise(40, 60) : noise(0.2, 0.4);
    loop1.rates.aqu_sz = s ? 8 : 0.5;
    collectors::DiskSample vda = loop1;
    vda.device = "vda";
    vda.rates.r_await_ms = noise(0.3, 0.6);
    vda.rates.aqu_sz = 0.5;
    b.disks = {loop1, vda};
    b.pressure = {{"io", s ? 0.9 : 0.02, 0.0, {}, {}}, {"cpu", 0.01, 0.0, {}, {}}};
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<IncidentEvent> feed(LiveCorrelator& c, const std::vector<SampleBatch>& batches) {
  std::vector<IncidentEvent> all;
  for (const auto& b : batches) {
    for (auto& e : c.onBatch(b)) all.push_back(std::move(e));
  }
  return all;
}

TEST(LiveCorrelator, OneStallOpensOnceAfterThreeSecondsAndClosesOnce) {
  LiveCorrelator c;
  auto batches = syntheticRun(200, [](size_t i) { return i >= 100 && i < 130; });
  std::vector<IncidentEvent> events;
  size_t open_at = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    for (auto& e : c.onBatch(batches[i])) {
      if (e.kind == IncidentEventKind::kOpen) open_at = i;
      if (e.kind == IncidentEventKind::kOpen) {
        // While open, the endpoint's view shows it.
        ASSERT_EQ(c.active().size(), 1u);
        EXPECT_EQ(c.active()[0].device, "loop1");
      }
      events.push_back(std::move(e));
    }
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, IncidentEventKind::kOpen);
  EXPECT_EQ(events[1].kind, IncidentEventKind::kClose);
  EXPECT_EQ(events[0].live_id, events[1].live_id);
  // Stalled intervals 100, 101, 102 make 3 s: the open comes with the third.
  EXPECT_EQ(open_at, 102u);
  EXPECT_STREQ(toString(events[0].incident.cls), "disk-slow");
  EXPECT_EQ(events[0].incident.device, "loop1");
  EXPECT_EQ(events[0].incident.physical_device, "vda");
  EXPECT_EQ(events[0].job_label, "python train.py");
  // The close carries the whole window: interval 100 starts at ts(99), 129 ends at ts(129).
  EXPECT_EQ(events[1].incident.start_ms, batches[99].wall_time_ms);
  EXPECT_EQ(events[1].incident.end_ms, batches[129].wall_time_ms);
  // ... and is sent once the job has been healthy for close_after_s (10 s).
  EXPECT_EQ(events[1].ts_ms, batches[139].wall_time_ms);
  EXPECT_TRUE(c.active().empty());
}

// The standing verdict over the job's last minute: a job whose two workers are CPU-bound and whose
// loop waits 40 % of each second for them, with cores free, reads as input-cpu, judged every
// five intervals; nothing is paged for it.
TEST(LiveCorrelator, JudgesTheStandingLimiterOverTheLastMinute) {
  auto batches = syntheticRun(90, [](size_t) { return false; });
  for (auto& b : batches) {
    auto& j = b.jobs[0];
    j.steps = 12;
    j.data_wait_seconds = 0.4;
    j.step_seconds = 0.6;
    j.workers = 2;
    j.workers_cpu_ratio = 1.9;
    j.main_thread_cpu_ratio = 0.5;
    b.cpu = collectors::CpuSample{4.0, 0.0, 16};
  }
  LiveCorrelator c;
  EXPECT_TRUE(c.limiters().empty());
  EXPECT_TRUE(feed(c, batches).empty());
  const auto limiters = c.limiters();
  ASSERT_EQ(limiters.size(), 1u);
  const model::LimiterVerdict& v = limiters[0].verdict;
  EXPECT_EQ(v.limiter, model::Limiter::kInputCpu);
  EXPECT_NEAR(v.input_wait_share, 0.4, 1e-6);
  EXPECT_NEAR(v.speedup, 1 / 0.6, 1e-6);
  EXPECT_LE(v.seconds, 60.0);  // the last minute, not the job's life
}

TEST(LiveCorrelator, AFlappingStallStaysOneIncident) {
  LiveCorrelator c;
  // Stalled 100-109, healthy 4 s, stalled 114-125, healthy 5 s, stalled 131-140.
  auto stalled = [](size_t i) {
    return (i >= 100 && i < 110) || (i >= 114 && i < 126) || (i >= 131 && i < 141);
  };
  const auto events = feed(c, syntheticRun(220, stalled));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, IncidentEventKind::kOpen);
  EXPECT_EQ(events[1].kind, IncidentEventKind::kClose);
  EXPECT_EQ(events[1].incident.end_ms, 1'000'000 + 140 * 1000);
}

TEST(LiveCorrelator, StallsFarApartAreSeparateIncidents) {
  LiveCorrelator c;
  auto stalled = [](size_t i) { return (i >= 100 && i < 110) || (i >= 200 && i < 210); };
  const auto events = feed(c, syntheticRun(300, stalled));
  ASSERT_EQ(events.size(), 4u);
  EXPECT_NE(events[0].live_id, events[2].live_id);
  EXPECT_EQ(events[2].kind, IncidentEventKind::kOpen);
}

TEST(LiveCorrelator, BlipsShorterThanOpenAfterAreNotReported) {
  LiveCorrelator c;
  EXPECT_TRUE(feed(c, syntheticRun(200, [](size_t i) { return i >= 100 && i < 102; })).empty());
}

// The job of syntheticRun exits a second after the last of BATCHES.
void appendExit(std::vector<SampleBatch>& batches) {
  collectors::JobDescription end;
  end.key = "pid:100:1";
  end.ended_ms = batches.back().wall_time_ms + 1000;
  SampleBatch last;
  last.wall_time_ms = *end.ended_ms;
  last.interval_seconds = 1;
  last.job_updates.push_back(end);
  batches.push_back(last);
}

TEST(LiveCorrelator, AJobEndingMidStallClosesItsIncident) {
  LiveCorrelator c;
  auto batches = syntheticRun(120, [](size_t i) { return i >= 100; });
  appendExit(batches);
  const auto events = feed(c, batches);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, IncidentEventKind::kClose);
  EXPECT_EQ(c.jobsTracked(), 0u);
}

// A job whose GPU goes idle at interval 100 while its processes do nothing (no CPU, no reads,
// no I/O wait), then exits after IDLE_S, if it does.
std::vector<SampleBatch> idleRun(size_t idle_s, bool exits) {
  auto batches = syntheticRun(100 + idle_s, [](size_t) { return false; });
  for (size_t i = 0; i < batches.size(); ++i) {
    collectors::JobSample& j = batches[i].jobs[0];
    j.workers_cpu_ratio = i < 100 ? 1.5 : 0.0;
    if (i >= 100) {
      j.gpu_util_percent = 0;
      j.read_bytes_per_second = 0;
    }
  }
  if (exits) appendExit(batches);
  return batches;
}

// Issue 16: a job winding down lingered 40-60 s with its GPU idle and its processes idle
// before it exited, and the live side paged for it. It is held for idle_open_after_s (2 min);
// an exit within that ends it unreported.
TEST(LiveCorrelator, AnIdleJobThatExitsWithinTheHoldIsNotReported) {
  LiveCorrelator c;
  EXPECT_TRUE(feed(c, idleRun(90, true)).empty());
  EXPECT_EQ(c.jobsTracked(), 0u);
}

// ... and one that stays idle past the hold is a hang, reported from where it began.
TEST(LiveCorrelator, AnIdleJobPastTheHoldIsAHangFromItsStart) {
  LiveCorrelator c;
  const auto batches = idleRun(150, false);
  std::vector<IncidentEvent> events;
  size_t open_at = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    for (auto& e : c.onBatch(batches[i])) {
      if (e.kind == IncidentEventKind::kOpen) open_at = i;
      events.push_back(std::move(e));
    }
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, IncidentEventKind::kOpen);
  EXPECT_STREQ(toString(events[0].incident.cls), "not-storage");
  EXPECT_EQ(events[0].incident.start_ms, batches[99].wall_time_ms);
  // Intervals 100..219 make 120 s (interval 100 starts at ts(99)): the open comes with the last.
  EXPECT_EQ(open_at, 219u);
  // A shorter hold, from the options, opens it sooner.
  LiveConfig config;
  config.idle_open_after_s = 30;
  LiveCorrelator soon(config);
  const auto early = feed(soon, idleRun(60, false));
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(early[0].incident.start_ms, batches[99].wall_time_ms);
}

// Issue 48: a job's exit as PyTorch ends it. Its workers finish the batches they had for the
// first seconds (busy, reading), then idle while they are joined; it exits after 60 s. Paged at
// 3 s before, since its processes were not idle then.
std::vector<SampleBatch> exitRun(bool workers_stopped) {
  auto batches = idleRun(60, true);
  for (size_t i = 100; i + 1 < batches.size(); ++i) {
    collectors::JobSample& j = batches[i].jobs[0];
    if (i < 104) {
      j.workers_cpu_ratio = 1.4;
      j.main_cpu_ratio = 0.6;
      j.read_bytes_per_second = 90e6;
    }
    if (workers_stopped && i >= 102) j.stopped_processes = 12;
  }
  return batches;
}

TEST(LiveCorrelator, AnExitWhoseWorkersFinishTheirBatchesFirstIsNotPaged) {
  LiveCorrelator c;
  EXPECT_TRUE(feed(c, exitRun(false)).empty());
  EXPECT_EQ(c.jobsTracked(), 0u);
}

// A job that hangs at its end (its workers stopped while the main process waits for them) is
// paged as soon as any stall is, not held as an exit; its exit later closes it.
TEST(LiveCorrelator, AJobHungAtItsEndWithStoppedWorkersIsPaged) {
  LiveCorrelator c;
  const auto batches = exitRun(true);
  const auto events = feed(c, batches);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, IncidentEventKind::kOpen);
  EXPECT_STREQ(toString(events[0].incident.cls), "not-storage");
  EXPECT_LE(events[0].ts_ms - batches[99].wall_time_ms, 5000);
  EXPECT_EQ(events[1].kind, IncidentEventKind::kClose);
}

TEST(LiveCorrelator, TheWindowIsBounded) {
  LiveConfig config;
  config.window_intervals = 300;
  LiveCorrelator c(config);
  // A stall past the window's end is still judged against the healthy start.
  const auto events = feed(c, syntheticRun(1000, [](size_t i) { return i >= 200 && i < 400; }));
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].kind, IncidentEventKind::kOpen);
}

// The real stalled runs on the H200 (issue 7's recordings), replayed as the agent saw them.
struct ReplayedRun {
  std::vector<IncidentEvent> events;
  int64_t injected_start = 0, injected_end = 0;
};

ReplayedRun replay(const std::string& name) {
  const std::string dir = stallwatch::testing::fixtures().string() + "/recordings/";
  ReplayedRun r;
  std::ifstream window(dir + name + ".window");
  window >> r.injected_start >> r.injected_end;
  auto recording = storage::Recording::open(dir + name + ".db");
  LiveCorrelator c;
  recording.replay([&](SampleBatch& b) {
    for (auto& e : c.onBatch(b)) r.events.push_back(std::move(e));
    return true;
  });
  return r;
}

TEST(LiveCorrelatorOnRealRuns, SlowDiskRunOpensAndClosesOneDiskSlowIncidentOnLoop0) {
  const ReplayedRun r = replay("h200-stall-disk");
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[0].kind, IncidentEventKind::kOpen);
  EXPECT_EQ(r.events[1].kind, IncidentEventKind::kClose);
  EXPECT_STREQ(toString(r.events[1].incident.cls), "disk-slow");
  EXPECT_EQ(r.events[1].incident.device, "loop0");
  EXPECT_EQ(r.events[1].incident.physical_device, "vda");
  EXPECT_NEAR(static_cast<double>(r.events[1].incident.start_ms),
              static_cast<double>(r.injected_start), 2000);
  EXPECT_NEAR(static_cast<double>(r.events[1].incident.end_ms), static_cast<double>(r.injected_end),
              2000);
  // Detection delay in recorded time: from the stall's start to the tick that opened it.
  EXPECT_LE(r.events[0].ts_ms - r.injected_start, 5000);
}

TEST(LiveCorrelatorOnRealRuns, HealthyRunHasNoEvents) {
  EXPECT_TRUE(replay("h200-stall-healthy").events.empty());
  EXPECT_TRUE(replay("h200-resnet18-healthy").events.empty());
}

TEST(LiveCorrelatorOnRealRuns, CpuStarvedRunBlamesNoDisk) {
  const ReplayedRun r = replay("h200-stall-cpu");
  ASSERT_FALSE(r.events.empty());
  for (const auto& e : r.events) {
    EXPECT_STRNE(toString(e.incident.cls), "disk-slow");
    EXPECT_TRUE(e.incident.device.empty());
  }
}

}  // namespace
}  // namespace stallwatch::correlator
