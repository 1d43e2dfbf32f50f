// libFuzzer: /proc/pressure/{io,cpu,memory}.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/host/pressure.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::collectors::parsePressure(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
