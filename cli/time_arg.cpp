#include "cli/time_arg.h"

#include <charconv>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "cli/duration.h"

namespace stallwatch::cli {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<int64_t> parseTimeArg(std::string_view text, int64_t now_ms) {
  if (text.empty()) return std::nullopt;
  const std::string s(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  char sep = 0;
  int consumed = 0;
  const int fields = std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &sec, &consumed);
  if (fields >= 6 && (sep == 'T' || sep == ' ')) {
    if (fields == 6) {
      sec = 0;
      consumed = 0;
      std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &consumed);
    }
    const std::string rest = s.substr(static_cast<size_t>(consumed));
    if (!(rest.empty() || rest == "Z")) return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    return static_cast<int64_t>(timegm(&tm)) * 1000;
  }
  // Bare digits of epoch-millisecond size: a timestamp; anything else that parses: "ago".
  // (Found by fuzz/fuzz_config: std::stoll threw on 37 digits and ended the process.)
  if (s.size() >= 12 && s.find_first_not_of("0123456789") == std::string::npos) {
    int64_t ms = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return ms;
  }
  if (auto ago = parseDuration(s)) {
    return now_ms - std::chrono::duration_cast<std::chrono::milliseconds>(*ago).count();
  }
  return std::nullopt;
}

}  // namespace stallwatch::cli
