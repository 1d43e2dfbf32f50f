// libFuzzer: /proc/<pid>/mountinfo (octal escapes, optional fields, separators).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/mountinfo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::collectors::parseMountinfo(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
