#include "agent/health_monitor.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

namespace stallwatch::agent {
namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HealthMonitor::HealthMonitor(HealthConfig config, std::shared_ptr<health::DriveReader> reader,
                             Callback on_result)
    : config_(config), reader_(std::move(reader)), on_result_(std::move(on_result)) {
  thread_ = std::thread([this] { run(); });
}

HealthMonitor::~HealthMonitor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();  // never waits on a drive: reads still hanging are abandoned, not joined
}

void HealthMonitor::setTargets(std::vector<health::DriveTarget> targets) {
  {
    std::lock_guard lock(mutex_);
    // A rescan that found the same drives changes nothing; a new drive is read at once.
    bool same = targets.size() == targets_.size();
    for (size_t i = 0; same && i < targets.size(); ++i)
      same = targets[i].device == targets_[i].device;
    if (same) return;
    targets_ = std::move(targets);
    targets_changed_ = true;
  }
  wake_.notify_all();
}

void HealthMonitor::requestNow(const std::string& device) {
  {
    std::lock_guard lock(mutex_);
    requested_.insert(device);
  }
  wake_.notify_all();
}

HealthStats HealthMonitor::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void HealthMonitor::readOne(const health::DriveTarget& target) {
  HealthResult r;
  r.target = target;
  r.ts_ms = nowMs();
  if (auto h = hung_.find(target.device); h != hung_.end()) {
    if (!h->second->done()) {
      std::lock_guard lock(mutex_);
      ++stats_.skipped_hung;
      return;
    }
    hung_.erase(h);
    spdlog::info("health: the hung read of {} returned", target.device);
  }
  if (!target.no_smart.empty()) {
    r.reading.device = target.device;
    r.reading.note = target.no_smart;
  } else {
    auto pending = health::startRead(reader_, target);
    const health::TimedRead t = health::waitFor(pending, config_.timeout);
    std::lock_guard lock(mutex_);
    ++stats_.reads;
    if (!t.finished) {
      ++stats_.timeouts;
      hung_[target.device] = pending;
      r.timed_out = true;
      r.error = "no answer within " + std::to_string(config_.timeout.count()) +
                " ms (abandoned; not asked again until it returns)";
      r.reading.device = target.device;
      r.reading.kind = target.kind;
      r.reading.note = r.error;
      spdlog::warn("health: {}: {}", target.device, r.error);
    } else if (!t.ok) {
      ++stats_.errors;
      r.error = t.error;
      r.reading.device = target.device;
      r.reading.kind = target.kind;
      r.reading.note = t.error;
      if (health::isPermissionError(t.error)) {
        if (!warned_permission_) {
          spdlog::warn(
              "health: reading SMART needs root (or CAP_SYS_RAWIO for ATA, CAP_SYS_ADMIN for "
              "NVMe): "
              "{}; drive health is unknown until then, recording goes on",
              t.error);
          warned_permission_ = true;
        }
      } else {
        spdlog::warn("health: {}: {}", target.device, t.error);
      }
    } else {
      r.reading = t.reading;
    }
  }
  const auto previous = last_reading_.find(target.device);
  r.verdict =
      health::judge(r.reading, previous == last_reading_.end() ? nullptr : &previous->second);
  const std::string verdict = health::toString(r.verdict.verdict);
  if (auto last = last_verdict_.find(target.device); last != last_verdict_.end()) {
    r.previous_verdict = last->second;
    r.changed = last->second != verdict;
  }
  last_verdict_[target.device] = verdict;
  // Rising rules compare with the last reading that had data.
  if (r.error.empty() && (r.reading.smart_available || r.reading.passed))
    last_reading_[target.device] = r.reading;
  on_result_(r);
}

void HealthMonitor::run() {
  pthread_setname_np(pthread_self(), "sw-health");  // per-thread CPU in top -H, the benches
  std::unique_lock lock(mutex_);
  auto next_round = std::chrono::steady_clock::now();
  while (true) {
    wake_.wait_until(lock, next_round,
                     [&] { return stopping_ || !requested_.empty() || targets_changed_; });
    if (stopping_) break;
    const bool round = std::chrono::steady_clock::now() >= next_round || targets_changed_;
    std::vector<health::DriveTarget> due;
    for (const auto& t : targets_) {
      if (round || requested_.count(t.device)) due.push_back(t);
    }
    requested_.clear();
    if (round && !targets_changed_)
      next_round = std::chrono::steady_clock::now() + config_.interval;
    if (targets_changed_ && next_round <= std::chrono::steady_clock::now()) {
      next_round = std::chrono::steady_clock::now() + config_.interval;
    }
    targets_changed_ = false;
    lock.unlock();
    for (const auto& t : due) {
      readOne(t);
      std::lock_guard check(mutex_);
      if (stopping_) break;
    }
    lock.lock();
  }
}

}  // namespace stallwatch::agent
