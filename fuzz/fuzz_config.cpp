// libFuzzer: the values operators type: durations, --listen addresses, --since/--until times.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/metrics_server.h"
#include "cli/duration.h"
#include "cli/time_arg.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  stallwatch::cli::parseDuration(text);
  stallwatch::agent::parseListenAddress(text);
  stallwatch::cli::parseTimeArg(text, 1'795'318'653'717);
  return 0;
}
