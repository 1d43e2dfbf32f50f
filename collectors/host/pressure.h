// /proc/pressure/{io,cpu,memory}: pressure stall information (PSI).
// Source: Documentation/accounting/psi.rst. Each file has a `some` line and, since 4.20 for io
// and memory and 5.13 for cpu, a `full` line:
//   some avg10=0.00 avg60=0.00 avg300=0.00 total=0
// `total` is cumulative stall time in microseconds; the averages are the kernel's own
// decaying percentages. The agent uses the `total` deltas, which cover exactly its interval.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

struct PressureLine {
  double avg10 = 0;
  double avg60 = 0;
  double avg300 = 0;
  uint64_t total_us = 0;
};

struct PressureStats {
  std::optional<PressureLine> some;
  std::optional<PressureLine> full;
};

struct PressureParse {
  PressureStats stats;
  std::vector<ParseProblem> skipped;
};

// Pure: parses one pressure file's text.
PressureParse parsePressure(std::string_view text);

// The collector: io, cpu and memory pressure as shares of each interval. A kernel without
// PSI (or with psi=0) gives "no data", not an error.
std::unique_ptr<Collector> makePressureCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
