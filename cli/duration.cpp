#include "cli/duration.h"

#include <charconv>
#include <cmath>

namespace stallwatch::cli {

std::optional<std::chrono::nanoseconds> parseDuration(std::string_view text) {
  size_t unit_start = 0;
  while (unit_start < text.size() &&
         ((text[unit_start] >= '0' && text[unit_start] <= '9') || text[unit_start] == '.')) {
    ++unit_start;
  }
  if (unit_start == 0) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + unit_start, value);
  if (ec != std::errc() || ptr != text.data() + unit_start || !std::isfinite(value)) {
    return std::nullopt;
  }
  const std::string_view unit = text.substr(unit_start);
  double ns_per_unit = 0;
  if (unit == "ns") {
    ns_per_unit = 1;
  } else if (unit == "us") {
    ns_per_unit = 1e3;
  } else if (unit == "ms") {
    ns_per_unit = 1e6;
  } else if (unit.empty() || unit == "s") {
    ns_per_unit = 1e9;
  } else if (unit == "m") {
    ns_per_unit = 60e9;
  } else if (unit == "h") {
    ns_per_unit = 3600e9;
  } else if (unit == "d") {
    ns_per_unit = 86400e9;
  } else {
    return std::nullopt;
  }
  const double ns = value * ns_per_unit;
  if (ns > 9.2e18) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

std::string formatDuration(std::chrono::nanoseconds d) {
  const auto ns = d.count();
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  return std::to_string(ns) + "ns";
}

}  // namespace stallwatch::cli
