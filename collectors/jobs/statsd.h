// StatsD lines, the wire format of the dataloader socket (docs/DATALOADER.md):
//   <name>:<value>|<type>[|@<sample rate>][|#<tag>,<tag>...]
// several lines per datagram, separated by '\n'. Types: c (counter), ms (timer), g (gauge).
// The DogStatsD "|#tags" extension is accepted and kept. Pure parsing, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"

namespace stallwatch::collectors {

enum class StatsdType { kCounter, kTimer, kGauge };

struct StatsdMetric {
  std::string name;
  double value = 0;
  StatsdType type = StatsdType::kCounter;
  double sample_rate = 1.0;  // a counter sent at rate r counts value / r
  std::vector<std::string> tags;
};

struct StatsdParse {
  std::vector<StatsdMetric> metrics;
  std::vector<ParseProblem> skipped;
};

inline constexpr size_t kMaxStatsdNameBytes = 200;
inline constexpr size_t kMaxStatsdTags = 16;

StatsdParse parseStatsd(std::string_view datagram);

}  // namespace stallwatch::collectors
