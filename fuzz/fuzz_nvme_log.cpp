// libFuzzer: an NVMe SMART / Health log page as a drive (or a broken controller) returns it.
#include <cstddef>
#include <cstdint>

#include "health/nvme_smart_log.h"
#include "health/verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = stallwatch::health::parseNvmeSmartLog({data, size});
  if (h) {
    stallwatch::health::DriveReading r;
    r.kind = stallwatch::health::DriveKind::kNvme;
    r.nvme = *h;
    stallwatch::health::judge(r, &r);
  }
  return 0;
}
