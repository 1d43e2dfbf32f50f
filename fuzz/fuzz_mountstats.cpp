// libFuzzer: /proc/self/mountstats (mount headers, per-op counters, wrapped values), and
// nfsiostat's arithmetic between each parsed mount and the next, as two readings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/counter_rates.h"
#include "collectors/devices/mountstats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parsed = stallwatch::collectors::parseMountstats(
      std::string_view(reinterpret_cast<const char*>(data), size));
  for (size_t i = 0; i + 1 < parsed.mounts.size(); ++i) {
    stallwatch::collectors::computeNfsRates(parsed.mounts[i], parsed.mounts[i + 1], 1.0);
  }
  return 0;
}
