// libFuzzer: the host's files: /proc/pressure/{io,cpu,memory}, /proc/stat's cpu lines and the
// root cgroup's cpu.stat.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/host/cpu_stat.h"
#include "collectors/host/pressure.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  stallwatch::collectors::parsePressure(text);
  stallwatch::collectors::parseSystemStat(text);
  stallwatch::collectors::parseCgroupCpuUsage(text);
  return 0;
}
