// libFuzzer: a dataloader datagram (StatsD lines) as any local process could send it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/jobs/statsd.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::collectors::parseStatsd(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
