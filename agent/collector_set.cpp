#include "agent/collector_set.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <chrono>

namespace stallwatch::agent {
namespace {

// This thread's CPU time: what a collector costs, apart from the waits in its wall time (an
// NVML call that sleeps in the driver).
std::chrono::nanoseconds threadCpuTime() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

const char* outcomeName(collectors::Outcome o) {
  switch (o) {
    case collectors::Outcome::kData:
      return "data";
    case collectors::Outcome::kNoData:
      return "no data";
    case collectors::Outcome::kError:
      return "error";
  }
  return "?";
}

}  // namespace

CollectorSet::CollectorSet(const std::set<std::string>& enabled,
                           const collectors::CollectorConfig& config, EventSink events)
    : events_(std::move(events)) {
  // In the registry's run order: a collector that reads others' samples of the tick after them.
  for (const collectors::CollectorEntry* entry :
       collectors::runOrder(collectors::collectorTable())) {
    if (!enabled.count(entry->name)) continue;
    Active a;
    a.collector = entry->make(config);
    a.stats.name = entry->name;
    active_.push_back(std::move(a));
  }
}

void CollectorSet::collect(const collectors::Tick& tick, collectors::SampleBatch& batch) {
  // One reading of each clock between two collectors, not two, and the thread's CPU clock only
  // at one tick in kCpuEveryTicks, from the fifth on (the first ticks read cold): it is a system
  // call (no vDSO), a dozen a tick were a tenth of the tick's own work, and seven still cost an
  // H200 host 2-4 us each (its mounts collector, that reading and its bookkeeping, took 2.8-4.4
  // us a collection; issue 47). The mean over every eighth tick says as much at the end of a
  // recording. The bookkeeping after a collector counts to the next one's: a few microseconds.
  const bool with_cpu = ticks_++ % kCpuEveryTicks == kCpuEveryTicks / 2;
  auto t0 = std::chrono::steady_clock::now();
  auto cpu0 = with_cpu ? threadCpuTime() : std::chrono::nanoseconds(0);
  for (auto& a : active_) {
    const collectors::CollectResult r = a.collector->collect(tick, batch);
    const auto t1 = std::chrono::steady_clock::now();
    if (with_cpu) {
      const auto cpu1 = threadCpuTime();
      a.stats.total_cpu_time += cpu1 - cpu0;
      ++a.stats.cpu_collections;
      cpu0 = cpu1;
    }
    a.stats.last_time = t1 - t0;
    a.stats.total_time += a.stats.last_time;
    account(a, r, tick.wall_time_ms);
    t0 = t1;
  }
}

void CollectorSet::account(Active& a, const collectors::CollectResult& r, int64_t wall_time_ms) {
  a.stats.last_ok = r.outcome != collectors::Outcome::kError && !r.unavailable;
  a.stats.available = !r.unavailable;
  a.stats.skipped += r.skipped;
  a.stats.refused += r.refused;
  switch (r.outcome) {
    case collectors::Outcome::kData:
      ++a.stats.data;
      break;
    case collectors::Outcome::kNoData:
      ++a.stats.no_data;
      break;
    case collectors::Outcome::kError:
      ++a.stats.errors;
      break;
  }
  if (!r.notice.empty()) {
    spdlog::info("{}: {}", a.stats.name, r.notice);
    events_({wall_time_ms, a.stats.name, "info", r.notice});
  }
  // Log and record a change of state, not every repetition of it. A collector's first reading
  // only primes its counters (no data, no reason): that is not news, and neither is its first
  // success.
  const bool priming = r.outcome == collectors::Outcome::kNoData && r.message.empty();
  if (!priming) {
    const bool changed = a.last_outcome != r.outcome ||
                         (r.outcome == collectors::Outcome::kError && r.message != a.last_message);
    const bool first_success = !a.last_outcome && r.outcome == collectors::Outcome::kData;
    if (changed && !first_success) {
      const bool bad = r.outcome == collectors::Outcome::kError;
      const std::string text =
          std::string(outcomeName(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
      if (bad) {
        spdlog::warn("{}: {}", a.stats.name, text);
      } else {
        spdlog::info("{}: {}", a.stats.name, text);
      }
      events_({wall_time_ms, a.stats.name, bad ? "error" : "info", text});
    }
    a.last_outcome = r.outcome;
    a.last_message = r.message;
  }
  if (r.skipped > 0 && r.outcome == collectors::Outcome::kData && a.stats.skipped == r.skipped) {
    spdlog::warn("{}: skipped {} malformed value(s), first: {}", a.stats.name, r.skipped,
                 r.message);
  }
}

collectors::SampleBatch CollectorSet::prime(const collectors::Tick& tick) {
  collectors::SampleBatch batch;
  batch.wall_time_ms = tick.wall_time_ms;
  collect(tick, batch);
  batch.dropIntervalFigures();
  return batch;
}

bool CollectorSet::wantsDeviceTree() const {
  for (const auto& a : active_) {
    if (a.collector->wantsDeviceTree()) return true;
  }
  return false;
}

void CollectorSet::setDeviceTree(const std::shared_ptr<const collectors::DeviceTree>& tree) {
  for (auto& a : active_) {
    if (a.collector->wantsDeviceTree()) a.collector->setDeviceTree(tree);
  }
}

std::vector<std::string> CollectorSet::finalReports() const {
  std::vector<std::string> out;
  for (const auto& a : active_) {
    if (auto line = a.collector->finalReport(); !line.empty()) out.push_back(std::move(line));
  }
  return out;
}

std::string CollectorSet::names() const {
  std::string out;
  for (const auto& a : active_) out += (out.empty() ? "" : ",") + a.stats.name;
  return out;
}

std::vector<CollectorStats> CollectorSet::stats() const {
  std::vector<CollectorStats> out;
  out.reserve(active_.size());
  for (const auto& a : active_) out.push_back(a.stats);
  return out;
}

}  // namespace stallwatch::agent
