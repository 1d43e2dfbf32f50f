// libFuzzer: the /proc/<pid> files the job tracker reads (stat, io, environ, task and
// children lists); the first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "collectors/jobs/jobs.h"
#include "collectors/proc_pid.h"
#include "common/text.h"

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
    case 2: {
      // A job's key from its environment: valid UTF-8 and bounded, whatever the bytes.
      const std::string key =
          stallwatch::collectors::jobKeyFromEnvironment(stallwatch::collectors::parseEnviron(text));
      if (!stallwatch::common::isUtf8(key) || key.size() > 512) __builtin_trap();
      break;
    }
    case 3:
      stallwatch::collectors::parsePidList(text);
      break;
  }
  return 0;
}
