// Points in time on the command line (--since, --until):
//   ISO 8601 dates and times: "2026-11-22" (midnight UTC), "2026-11-22T02:00",
//     "2026-11-22 02:00:30.5", with "Z" or an offset ("+02:00", "-0530", "+02"); no offset
//     is UTC;
//   Unix epoch time: bare digits, seconds below 1e11 ("1795318660", "1795318660.25"),
//     milliseconds from there on ("1795318660250"); "0" is the epoch itself;
//   a duration with its unit, meaning that long ago: "30m", "2h", "7d", "1h30m".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/recording.h"

namespace stallwatch::cli {

std::optional<int64_t> parseTimeArg(std::string_view text, int64_t now_ms);
int64_t nowMs();

// --since and --until into RANGE (an empty one leaves that end open). False after saying on
// stderr, as COMMAND, which one is not a time and what is.
bool parseTimeRange(const std::string& since, const std::string& until, storage::TimeRange& range,
                    const char* command);

}  // namespace stallwatch::cli
