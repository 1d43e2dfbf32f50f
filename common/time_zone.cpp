#include "common/time_zone.h"

#include <atomic>

namespace stallwatch::common {
namespace {

std::atomic<bool> g_utc{false};

}  // namespace

void showTimesInUtc(bool utc) { g_utc = utc; }
bool timesInUtc() { return g_utc; }

std::tm brokenDown(std::time_t t) {
  std::tm out{};
  if (g_utc) {
    gmtime_r(&t, &out);
  } else {
    localtime_r(&t, &out);
  }
  return out;
}

std::time_t fromBrokenDown(std::tm tm) {
  if (g_utc) return timegm(&tm);
  tm.tm_isdst = -1;  // whatever the zone's rule says on that day
  return std::mktime(&tm);
}

}  // namespace stallwatch::common
