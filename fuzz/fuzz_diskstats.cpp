// libFuzzer: /proc/diskstats lines (any kernel layout, hostile values).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/devices/diskstats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::collectors::parseDiskstats(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
