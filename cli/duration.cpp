#include "cli/duration.h"

#include <charconv>
#include <cmath>

namespace stallwatch::cli {

namespace {

// One "<number><unit>" term at the start of TEXT; its length in USED. A bare number (no unit)
// is seconds, and only as the whole text.
std::optional<double> parseTerm(std::string_view text, size_t& used) {
  size_t unit_start = 0;
  while (unit_start < text.size() &&
         ((text[unit_start] >= '0' && text[unit_start] <= '9') || text[unit_start] == '.')) {
    ++unit_start;
  }
  if (unit_start == 0) return std::nullopt;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + unit_start, value);
  if (ec != std::errc() || ptr != text.data() + unit_start || !std::isfinite(value))
    return std::nullopt;
  size_t unit_end = unit_start;
  while (unit_end < text.size() && text[unit_end] >= 'a' && text[unit_end] <= 'z') ++unit_end;
  const std::string_view unit = text.substr(unit_start, unit_end - unit_start);
  used = unit_end;
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}, {"d", 86400e9}};
  if (unit.empty()) return value * 1e9;
  for (const auto& [name, ns] : kUnits) {
    if (unit == name) return value * ns;
  }
  return std::nullopt;
}

}  // namespace

// Compound durations ("1h30m", "2m30s", "1d12h") are terms added up; a bare number alone is
// seconds.
std::optional<std::chrono::nanoseconds> parseDuration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double ns = 0;
  size_t terms = 0;
  while (!text.empty()) {
    size_t used = 0;
    const auto term = parseTerm(text, used);
    if (!term) return std::nullopt;
    const bool has_unit = used > 0 && text[used - 1] >= 'a' && text[used - 1] <= 'z';
    if (!has_unit && (terms > 0 || used < text.size())) return std::nullopt;  // "1h30": ambiguous
    ns += *term;
    ++terms;
    text.remove_prefix(used);
  }
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
