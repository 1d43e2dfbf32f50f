#pragma once
// The zone times are shown and read in (issue 44): the local zone by default, as journalctl and
// `date -d` use it, with the zone said beside each time; UTC with --utc. Set once, at the start
// of a command, before any thread; read by the text renderers and the time-argument parser.

#include <cstdint>
#include <ctime>
#include <string>

namespace stallwatch::common {

void showTimesInUtc(bool utc);
bool timesInUtc();

// T (Unix seconds) broken down in the zone shown.
std::tm brokenDown(std::time_t t);
// Unix seconds of TM read as a time of the zone shown (its fields as written: no offset).
std::time_t fromBrokenDown(std::tm tm);

}  // namespace stallwatch::common
