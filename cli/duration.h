// Durations on the command line: "500ms", "1s", "2.5s", "10m", "1h", "14d", and compounds of
// them ("1h30m", "2m30s"); a bare number alone is seconds. Parsed here rather than with CLI11's
// AsNumberWithUnit so that errors can say exactly what is accepted.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace stallwatch::cli {

std::optional<std::chrono::nanoseconds> parseDuration(std::string_view text);
std::string formatDuration(std::chrono::nanoseconds d);

}  // namespace stallwatch::cli
