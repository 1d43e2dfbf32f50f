// Every command's --json output: one versioned envelope (issue 42), as smartctl versions its
// own. A reader checks json_format_version's major number: it moves when a key is renamed or
// removed or a type changes; the minor number moves when keys are added. The keys of each
// command's payload are in docs/stallwatch-json.schema.json, which CI checks every output against.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace stallwatch::cli {

inline constexpr int kJsonFormatMajor = 1;
inline constexpr int kJsonFormatMinor = 0;

// Prints BODY (an object: the command's payload under its keys) with the envelope's keys added:
// json_format_version, stallwatch_version, command.
void printJson(std::string_view command, nlohmann::json body);

}  // namespace stallwatch::cli
