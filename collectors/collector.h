// The one interface every collector implements: a name and a collect step into a batch.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "collectors/samples.h"

namespace stallwatch::collectors {

class DeviceTree;

// Three outcomes per collection: data, no data (no such file, no GPU), or an error. One
// collector's failure never stops the others; the agent counts and logs it.
enum class Outcome { kData, kNoData, kError };

struct CollectResult {
  Outcome outcome = Outcome::kData;
  std::string message;   // why there is no data, or what failed
  uint64_t skipped = 0;  // malformed lines or out-of-range values dropped this time
  // Said once by the collector, whatever the outcome: a reading this host cannot give and the
  // fallback used instead (logged and stored as an event by the agent).
  std::string notice;
  // No data because the source is missing on this host (no NVIDIA driver, no PSI), not because
  // there was nothing to read this time (no job yet): the collector is not working here.
  bool unavailable = false;
  uint64_t refused = 0;  // items not taken past a bound this time (processes past the jobs cap)

  static CollectResult data(uint64_t skipped = 0) { return {Outcome::kData, {}, skipped, {}}; }
  static CollectResult noData(std::string why) { return {Outcome::kNoData, std::move(why), 0, {}}; }
  static CollectResult unavailableHere(std::string why) {
    return {Outcome::kNoData, std::move(why), 0, {}, true};
  }
  static CollectResult error(std::string what) { return {Outcome::kError, std::move(what), 0, {}}; }
};

// A line a parser skipped, with its 1-based number and what was wrong with it.
struct ParseProblem {
  size_t line = 0;
  std::string message;
};

struct Tick {
  int64_t monotonic_ns = 0;  // intervals come from here, immune to wall-clock jumps
  int64_t wall_time_ms = 0;  // what is stored as the sample's time
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string_view name() const = 0;
  // Reads the source and appends this interval's samples to `out`. The first call only
  // primes the counters: rates need two readings.
  virtual CollectResult collect(const Tick& tick, SampleBatch& out) = 0;

  // Collectors that map what they see to block devices (open files → mount → device) ask
  // for the device tree; the agent scans it only if one does, and hands each rescan over.
  virtual bool wantsDeviceTree() const { return false; }
  virtual void setDeviceTree(const std::shared_ptr<const DeviceTree>& /*tree*/) {}
  // A line for the log when the recording ends (what it received, what it dropped); "" for none.
  virtual std::string finalReport() const { return {}; }
};

}  // namespace stallwatch::collectors
