// libFuzzer: the /proc/<pid> files the job tracker reads (stat, io, environ, task and
// children lists); the first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "collectors/proc_pid.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      stallwatch::collectors::parseProcStat(text);
      break;
    case 1:
      stallwatch::collectors::parseProcIo(text);
      break;
    case 2:
      stallwatch::collectors::parseEnviron(text);
      break;
    case 3:
      stallwatch::collectors::parsePidList(text);
      break;
  }
  return 0;
}
