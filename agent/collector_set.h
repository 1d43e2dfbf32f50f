// The enabled collectors, run one after another into a tick's batch through the one
// Collector interface, with their statistics and the log of their state changes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/metrics.h"
#include "collectors/collector.h"
#include "collectors/registry.h"
#include "storage/store.h"

namespace stallwatch::agent {

class CollectorSet {
 public:
  // The thread's CPU time around each collector is read at one tick in this many.
  static constexpr uint64_t kCpuEveryTicks = 8;

  // Where a collector's notices and changes of state go besides the log (the DB's events).
  using EventSink = std::function<void(storage::AgentEvent)>;

  // The collectors of collectorTable() named in ENABLED, in the table's order.
  CollectorSet(const std::set<std::string>& enabled, const collectors::CollectorConfig& config,
               EventSink events);

  // Runs every collector into BATCH. A notice is said once; a change of outcome (not every
  // repetition of it) is logged and recorded.
  void collect(const collectors::Tick& tick, collectors::SampleBatch& batch);
  // The first reading: it primes the counters. What it found stands as facts (jobs found at
  // start); its figures cover no interval and are dropped.
  collectors::SampleBatch prime(const collectors::Tick& tick);

  bool wantsDeviceTree() const;
  void setDeviceTree(const std::shared_ptr<const collectors::DeviceTree>& tree);
  // Each collector's finalReport(), for the log at the end of a recording.
  std::vector<std::string> finalReports() const;

  std::string names() const;  // comma-separated, as the run records them
  std::vector<CollectorStats> stats() const;

 private:
  struct Active {
    std::unique_ptr<collectors::Collector> collector;
    CollectorStats stats;
    std::optional<collectors::Outcome> last_outcome;
    std::string last_message;
  };
  void account(Active& a, const collectors::CollectResult& r, int64_t wall_time_ms);

  std::vector<Active> active_;
  EventSink events_;
  uint64_t ticks_ = 0;  // collect() calls, prime() included
};

}  // namespace stallwatch::agent
