#include "cli/time_arg.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <tuple>

#include "cli/duration.h"
#include "common/time_zone.h"

namespace stallwatch::cli {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// Epoch seconds below this, milliseconds from here on (1e11 s is the year 5138; 1e11 ms is
// 1973, long before any recording).
constexpr double kEpochMillisecondsFrom = 1e11;

bool digits(std::string_view s, size_t from, size_t n) {
  if (from + n > s.size()) return false;
  for (size_t i = from; i < from + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

int number(std::string_view s, size_t from, size_t n) {
  int v = 0;
  for (size_t i = from; i < from + n; ++i) v = v * 10 + (s[i] - '0');
  return v;
}

// "Z", "+HH:MM", "+HHMM", "+HH" (or '-'), in seconds east of UTC; none for anything else.
std::optional<int> offsetSeconds(std::string_view z) {
  if (z.empty() || z == "Z" || z == "z") return 0;
  if (z[0] != '+' && z[0] != '-') return std::nullopt;
  const int sign = z[0] == '-' ? -1 : 1;
  z.remove_prefix(1);
  // HH, then MM after it or after a colon.
  const size_t minutes_at = z.size() == 5 && z[2] == ':' ? 3 : 2;
  const bool minutes = z.size() == minutes_at + 2;
  if (!digits(z, 0, 2) || (z.size() != 2 && !minutes) || (minutes && !digits(z, minutes_at, 2)))
    return std::nullopt;
  const int h = number(z, 0, 2), m = minutes ? number(z, minutes_at, 2) : 0;
  if (h > 23 || m > 59) return std::nullopt;
  return sign * (h * 3600 + m * 60);
}

std::optional<int64_t> parseIso8601(std::string_view s) {
  if (!digits(s, 0, 4) || s.size() < 10 || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' ||
      !digits(s, 8, 2)) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = number(s, 0, 4) - 1900;
  tm.tm_mon = number(s, 5, 2) - 1;
  tm.tm_mday = number(s, 8, 2);
  size_t at = 10;
  double fraction = 0;
  if (at < s.size() && (s[at] == 'T' || s[at] == 't' || s[at] == ' ')) {
    if (!digits(s, at + 1, 2) || at + 3 >= s.size() || s[at + 3] != ':' || !digits(s, at + 4, 2))
      return std::nullopt;
    tm.tm_hour = number(s, at + 1, 2);
    tm.tm_min = number(s, at + 4, 2);
    at += 6;
    if (at < s.size() && s[at] == ':') {
      if (!digits(s, at + 1, 2)) return std::nullopt;
      tm.tm_sec = number(s, at + 1, 2);
      at += 3;
      if (at < s.size() && (s[at] == '.' || s[at] == ',')) {
        size_t end = at + 1;
        while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
        if (end == at + 1) return std::nullopt;
        fraction =
            std::stod("0." + std::string(s.substr(at + 1, std::min<size_t>(end - at - 1, 9))));
        at = end;
      }
    }
  }
  const auto offset = offsetSeconds(s.substr(at));
  if (!offset) return std::nullopt;
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  // A day the month does not have (2026-02-30): timegm would roll it into the next month.
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int year = tm.tm_year + 1900;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (tm.tm_mday > kDays[tm.tm_mon] + (tm.tm_mon == 1 && leap ? 1 : 0)) return std::nullopt;
  // Without an offset, a time of the zone shown (local, or UTC with --utc), as `date -d` reads it.
  const bool zoned = at < s.size();
  const int64_t utc_s = zoned ? static_cast<int64_t>(timegm(&tm)) - *offset
                              : static_cast<int64_t>(common::fromBrokenDown(tm));
  return utc_s * 1000 + static_cast<int64_t>(std::llround(fraction * 1000));
}

// Bare digits, with an optional fraction: epoch seconds or milliseconds by size.
std::optional<int64_t> parseEpoch(std::string_view s) {
  const size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  if (whole.empty() || !digits(whole, 0, whole.size())) return std::nullopt;
  if (dot != std::string_view::npos &&
      (dot + 1 == s.size() || !digits(s, dot + 1, s.size() - dot - 1))) {
    return std::nullopt;
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value) || value > 9.2e15)
    return std::nullopt;
  return value < kEpochMillisecondsFrom ? static_cast<int64_t>(std::llround(value * 1000))
                                        : static_cast<int64_t>(std::llround(value));
}

}  // namespace

std::optional<int64_t> parseTimeArg(std::string_view text, int64_t now_ms) {
  if (text.empty()) return std::nullopt;
  if (auto t = parseIso8601(text)) return t;
  // (Found by fuzz/fuzz_config: std::stoll threw on 37 digits and ended the process; the
  // epoch reader refuses anything past 9.2e15 instead.)
  if (text.find_first_not_of("0123456789.") == std::string_view::npos) return parseEpoch(text);
  // A duration with a unit: that long ago. A bare number never gets here (it is an epoch).
  if (auto ago = parseDuration(text)) {
    return now_ms - std::chrono::duration_cast<std::chrono::milliseconds>(*ago).count();
  }
  return std::nullopt;
}

bool parseTimeRange(const std::string& since, const std::string& until, storage::TimeRange& range,
                    const char* command) {
  const int64_t now = nowMs();
  for (auto [text, target, flag] : {std::tuple{&since, &range.since_ms, "--since"},
                                    std::tuple{&until, &range.until_ms, "--until"}}) {
    if (text->empty()) continue;
    *target = parseTimeArg(*text, now);
    if (!*target) {
      std::cerr << "stallwatch " << command << ": " << flag << " '" << *text
                << "' is not a time (2026-11-22, 2026-11-22T02:00:00Z, '2026-11-22 04:00+02:00', "
                   "epoch seconds "
                   "1795318660 or milliseconds 1795318660000, or a duration ago: 2h, 1h30m)\n";
      return false;
    }
  }
  if (range.since_ms && range.until_ms && *range.since_ms > *range.until_ms) {
    std::cerr << "stallwatch " << command << ": --since '" << since << "' is after --until '"
              << until << "': the range is empty (swapped?)\n";
    return false;
  }
  return true;
}

}  // namespace stallwatch::cli
