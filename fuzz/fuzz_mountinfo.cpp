// libFuzzer: /proc/<pid>/mountinfo (octal escapes, optional fields, separators).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/devices/mountinfo.h"
#include "common/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parsed = stallwatch::collectors::parseMountinfo(
      std::string_view(reinterpret_cast<const char*>(data), size));
  // What names a device in the DB, JSON and /metrics is valid UTF-8 and bounded, whatever came.
  for (const auto& m : parsed.mounts) {
    for (const std::string* text : {&m.mount_point, &m.source, &m.fs_type}) {
      if (!stallwatch::common::isUtf8(*text) ||
          text->size() > stallwatch::collectors::kMaxMountTextBytes)
        __builtin_trap();
    }
  }
  return 0;
}
