// The health thread: reads every drive's health records at a slow cadence (10 minutes by
// default) and at once when asked (the live correlator suspects a device). Each read runs
// with a timeout on a thread of its own (health/drive_source.h); a drive whose read hangs is
// not asked again until that read returns. Results go to a callback on this thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "health/drive_source.h"
#include "health/verdict.h"

namespace stallwatch::agent {

struct HealthConfig {
  std::chrono::milliseconds interval = std::chrono::minutes(10);
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

struct HealthResult {
  health::DriveTarget target;
  health::DriveReading reading;
  health::HealthVerdict verdict;
  int64_t ts_ms = 0;
  bool changed = false;  // the verdict differs from this drive's previous one this run
  std::string previous_verdict;
  std::string error;  // the read failed, or timed out
  bool timed_out = false;
};

struct HealthStats {
  uint64_t reads = 0;
  uint64_t errors = 0;
  uint64_t timeouts = 0;
  uint64_t skipped_hung = 0;  // not asked: the previous read has not returned
};

class HealthMonitor {
 public:
  using Callback = std::function<void(const HealthResult&)>;
  HealthMonitor(HealthConfig config, std::shared_ptr<health::DriveReader> reader,
                Callback on_result);
  ~HealthMonitor();
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  void setTargets(std::vector<health::DriveTarget> targets);
  void requestNow(const std::string& device);  // e.g. the physical device of a disk-slow stall
  HealthStats stats() const;

 private:
  void run();
  void readOne(const health::DriveTarget& target);

  const HealthConfig config_;
  std::shared_ptr<health::DriveReader> reader_;
  Callback on_result_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<health::DriveTarget> targets_;
  bool targets_changed_ = false;
  std::set<std::string> requested_;
  bool stopping_ = false;
  HealthStats stats_;
  // Owned by the health thread.
  std::map<std::string, std::shared_ptr<health::PendingRead>> hung_;
  std::map<std::string, health::DriveReading> last_reading_;
  std::map<std::string, std::string> last_verdict_;
  bool warned_permission_ = false;
  std::thread thread_;
};

}  // namespace stallwatch::agent
