#include "cli/json_output.h"

#include <iostream>
#include <string>

namespace stallwatch::cli {

void printJson(std::string_view command, nlohmann::json body) {
  body["json_format_version"] = {kJsonFormatMajor, kJsonFormatMinor};
  body["stallwatch_version"] = STALLWATCH_VERSION;
  body["command"] = std::string(command);
  // Bytes that are not UTF-8 (a path, a command line) come out replaced, never as an error.
  std::cout << body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace stallwatch::cli
