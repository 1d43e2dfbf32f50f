// Small helpers for splitting kernel text without allocating: fields are separated by runs of
// spaces or tabs, numbers are unsigned decimal. Shared by the /proc and /sys parsers.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace stallwatch::collectors {

// Calls fn(line, line_number) for each line (1-based), without the newline.
template <typename Fn>
void forEachLine(std::string_view text, Fn&& fn) {
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    fn(line, ++line_number);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
}

// Splits on spaces and tabs into at most N fields; returns how many it found (it stops
// counting at N + 1, so a caller can tell "too many").
template <size_t N>
size_t splitFields(std::string_view line, std::string_view (&fields)[N]) {
  size_t count = 0;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (count == N) return N + 1;
    fields[count++] = line.substr(start, i - start);
  }
  return count;
}

// Whether NAME is one of LIST's items, separated by SEP ("rw,memory" holds "memory", not "mem").
inline bool listHas(std::string_view list, std::string_view name, char sep = ',') {
  while (!list.empty()) {
    const size_t end = list.find(sep);
    if (list.substr(0, end) == name) return true;
    list = end == std::string_view::npos ? std::string_view() : list.substr(end + 1);
  }
  return false;
}

// The whole token as a decimal within 64 bits, as std::from_chars reads one; nothing else. A
// loop of its own, kept inline: std::from_chars' general path (any base, out of line) was a sixth
// of the tick's own instructions, most of it the 200 numbers of /proc/diskstats (issue 47).
inline std::optional<uint64_t> parseUnsigned(std::string_view token) {
  if (token.empty()) return std::nullopt;
  uint64_t value = 0;
  for (const char c : token) {
    const auto digit = static_cast<uint64_t>(static_cast<unsigned char>(c) - '0');
    if (digit > 9 || __builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, digit, &value))
      return std::nullopt;
  }
  return value;
}

// "MAJOR:MINOR" as the kernel prints a device number.
inline std::optional<std::pair<uint32_t, uint32_t>> parseDevnum(std::string_view token) {
  const size_t colon = token.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto major = parseUnsigned(token.substr(0, colon));
  const auto minor = parseUnsigned(token.substr(colon + 1));
  if (!major || !minor || *major > UINT32_MAX || *minor > UINT32_MAX) return std::nullopt;
  return std::make_pair(static_cast<uint32_t>(*major), static_cast<uint32_t>(*minor));
}

inline std::optional<double> parseDouble(std::string_view token) {
  double value = 0;
  const auto* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, value);
  if (ec != std::errc() || ptr != end || token.empty()) return std::nullopt;
  return value;
}

}  // namespace stallwatch::collectors
