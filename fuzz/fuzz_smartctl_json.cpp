// libFuzzer: smartctl's JSON output, and the verdict on whatever it yields.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "health/reading_json.h"
#include "health/smartctl_json.h"
#include "health/verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto p = stallwatch::health::parseSmartctlJson(
        std::string_view(reinterpret_cast<const char*>(data), size));
    stallwatch::health::judge(p.reading, &p.reading);
    // Round trip through the DB's form.
    stallwatch::health::readingFromJson(stallwatch::health::toJson(p.reading));
  } catch (const std::invalid_argument&) {
    // A clear error is the expected outcome for most inputs.
  }
  return 0;
}
