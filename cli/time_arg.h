// Points in time on the command line (--since, --until): "2026-11-22T02:00:00Z",
// "2026-11-22 02:00" (UTC), Unix epoch milliseconds, or a duration meaning that long ago
// ("30m", "2h", "7d").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace stallwatch::cli {

std::optional<int64_t> parseTimeArg(std::string_view text, int64_t now_ms);
int64_t nowMs();

}  // namespace stallwatch::cli
