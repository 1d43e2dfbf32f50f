// smartctl's JSON output (`smartctl --json -x`, smartmontools 7+) read into the same
// DriveReading the native readers produce, so one set of rules judges drives the native
// readers cannot reach (SAS/SCSI, behind MegaRAID or USB bridges) and captured dumps.
// Tolerates partial outputs (`--info`, `-H` alone), format versions [0,1] and [1,0], and
// reports `--scan` listings and open failures as such rather than as drives.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "health/drive_reading.h"

namespace stallwatch::health {

enum class SmartctlOutput {
  kDrive,       // a device's data (complete or partial)
  kScan,        // `smartctl --scan`: a device list; SCANNED has the names
  kOpenFailed,  // smartctl could not open the device (exit status bit 1); NOTE says why
};

struct SmartctlParse {
  SmartctlOutput kind = SmartctlOutput::kDrive;
  DriveReading reading;
  std::vector<std::string> scanned;
};

// Throws std::invalid_argument with a clear message on text that is not smartctl JSON.
SmartctlParse parseSmartctlJson(std::string_view text);

}  // namespace stallwatch::health
