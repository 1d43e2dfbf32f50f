// libFuzzer: ATA SMART data as libatasmart keeps it (tagged IDENTIFY/status/data/threshold
// sections), through the same parse path the agent uses on a drive's answer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "health/ata_smart.h"
#include "health/verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  stallwatch::health::DriveReading r;
  std::string error;
  if (stallwatch::health::parseAtaSmartBlob({data, size}, r, error))
    stallwatch::health::judge(r, &r);
  return 0;
}
