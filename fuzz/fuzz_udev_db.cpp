// libFuzzer: a udev database entry (/run/udev/data/b<maj>:<min>).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/devices/device_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::collectors::parseUdevDatabase(
      std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
