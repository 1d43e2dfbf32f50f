// The health thread against a fake device layer: drives that answer, fail, or hang.
#include "agent/health_monitor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "agent/recorder.h"
#include "collectors/registry.h"
#include "test_support.h"

namespace stallwatch::agent {
namespace {

using namespace std::chrono_literals;

// Drives named in HANGING block until release(); "denied" fails as without root; the rest
// answer with a healthy NVMe log.
class FakeDrives : public health::DriveReader {
 public:
  explicit FakeDrives(std::set<std::string> hanging) : hanging_(std::move(hanging)) {}
  bool read(const health::DriveTarget& t, health::DriveReading& r, std::string& error) override {
    ++calls_;
    if (hanging_.count(t.device)) {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return released_; });
    }
    if (t.device == "denied") {
      error = "cannot open /dev/denied: Permission denied";
      return false;
    }
    r.device = t.device;
    r.kind = health::DriveKind::kNvme;
    r.smart_available = true;
    r.nvme = health::NvmeHealth{};
    r.nvme->available_spare = 100;
    r.nvme->available_spare_threshold = 10;
    return true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }
  std::atomic<int> calls_{0};

 private:
  std::set<std::string> hanging_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
};

health::DriveTarget target(const std::string& name) {
  health::DriveTarget t;
  t.device = name;
  t.kind = health::DriveKind::kNvme;
  return t;
}

TEST(HealthMonitor, AHungDriveIsAbandonedAtItsTimeoutAndTheOthersKeepTheirCadence) {
  auto drives = std::make_shared<FakeDrives>(std::set<std::string>{"nvme1n1"});
  std::mutex m;
  std::map<std::string, std::vector<HealthResult>> results;
  {
    HealthMonitor monitor({200ms, 100ms}, drives, [&](const HealthResult& r) {
      std::lock_guard lock(m);
      results[r.target.device].push_back(r);
    });
    monitor.setTargets({target("nvme0n1"), target("nvme1n1"), target("denied")});
    std::this_thread::sleep_for(1100ms);
    const HealthStats s = monitor.stats();
    EXPECT_EQ(s.timeouts, 1u) << "the hung drive is asked once, then skipped until it answers";
    EXPECT_GE(s.skipped_hung, 3u);
    std::lock_guard lock(m);
    // Rounds every 200 ms for 1.1 s, the first costing one 100 ms timeout: 5 or 6 readings.
    EXPECT_GE(results["nvme0n1"].size(), 4u);
    EXPECT_EQ(health::toString(results["nvme0n1"].back().verdict.verdict), std::string("ok"));
    ASSERT_EQ(results["nvme1n1"].size(), 1u);
    EXPECT_TRUE(results["nvme1n1"][0].timed_out);
    EXPECT_EQ(results["nvme1n1"][0].verdict.verdict, health::Verdict::kUnknown);
    ASSERT_FALSE(results["denied"].empty());
    EXPECT_EQ(results["denied"][0].verdict.verdict, health::Verdict::kUnknown);
    EXPECT_NE(results["denied"][0].error.find("Permission denied"), std::string::npos);
  }
  // Destroying the monitor did not wait for the hung read; once it returns, it is over.
  drives->release();
}

TEST(HealthMonitor, ADriveReturningFromAHangIsReadAgain) {
  auto drives = std::make_shared<FakeDrives>(std::set<std::string>{"sdb"});
  std::atomic<int> sdb_ok{0};
  HealthMonitor monitor({100ms, 50ms}, drives, [&](const HealthResult& r) {
    if (r.target.device == "sdb" && !r.timed_out) ++sdb_ok;
  });
  monitor.setTargets({target("sdb")});
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(sdb_ok.load(), 0);
  drives->release();
  std::this_thread::sleep_for(400ms);
  EXPECT_GE(sdb_ok.load(), 1);
}

TEST(HealthMonitor, RequestNowReadsOutOfCadence) {
  auto drives = std::make_shared<FakeDrives>(std::set<std::string>{});
  std::atomic<int> reads{0};
  HealthMonitor monitor({1h, 1s}, drives, [&](const HealthResult&) { ++reads; });
  monitor.setTargets({target("nvme0n1")});
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(reads.load(), 1);
  monitor.requestNow("nvme0n1");
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(reads.load(), 2);
}

// The whole recorder with every drive hanging: sampling keeps its interval.
TEST(HealthMonitor, SamplingKeepsItsIntervalWhileEveryDriveHangs) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("stallwatch-health-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // sda..sde are ATA disks in this tree (dm and md devices over them): every one hangs.
  auto drives =
      std::make_shared<FakeDrives>(std::set<std::string>{"sda", "sdb", "sdc", "sdd", "sde"});
  RecorderOptions o;
  o.db_path = dir / "sw.db";
  o.interval = 100ms;
  o.duration = 2s;
  o.collector_config.root = collectors::SystemRoot::under(stallwatch::testing::fixtures().string() +
                                                          "/procfs/prometheus-procfs");
  o.enabled_collectors = {"diskstats", "pressure"};
  o.health = HealthConfig{200ms, 100ms};
  o.drive_reader = drives;
  sigset_t none;
  sigemptyset(&none);
  const RecorderSummary s = record(o, none);
  drives->release();
  EXPECT_GE(s.intervals, 19u);
  EXPECT_EQ(s.late_ticks, 0u);
  ASSERT_TRUE(s.health);
  // One drive hangs at a time (the thread waits on each for its timeout): 100 ms per round.
  EXPECT_GE(s.health->timeouts, 5u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stallwatch::agent
