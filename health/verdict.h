// A drive's verdict from its health records, with the counters that decided it. The rules,
// and where they come from:
//
//  failing   the drive's own overall status failed (ATA SMART RETURN STATUS, smartctl's
//            smart_status.passed false or exit status bit 3); any NVMe critical warning bit
//            (NVMe Base Specification 2.0, figure 207: spare below threshold, temperature,
//            reliability degraded, read-only, volatile backup failed); a pre-failure ATA
//            attribute at or below its threshold; a counter below rising since the last
//            reading (Pinheiro, Weber, Barroso, "Failure Trends in a Large Disk Drive
//            Population", FAST 2007: after their first reallocation drives were 14 times,
//            after their first probational (pending) count 16 times more likely to fail
//            within 60 days than drives without).
//  warning   ATA 5 (reallocated sectors), 187 (reported uncorrectable), 188 (command
//            timeouts), 197 (current pending sectors), 198 (offline uncorrectable) with a raw
//            value above zero (Backblaze, "What SMART Stats Tell Us About Hard Drives", 2016:
//            the five stats that predict failure; 76.7 % of failed drives had one above 0,
//            4.2 % of working ones); NVMe media and data integrity errors above zero, or error
//            log entries rising; SCSI grown defects or uncorrected read/write/verify errors
//            above zero.
//  worn-out  NVMe percentage used at 100 or more (the vendor's endurance estimate is spent;
//            NVMe spec: "a value of 100 indicates that the estimated endurance has been
//            consumed, but may not indicate an NVM subsystem failure").
//  ok        SMART read, none of the above.
//  unknown   nothing readable (permission, an open failure, a drive in standby).
//  unsupported  a device without SMART (virtio, loop, dm, md, network filesystems).
#pragma once

#include <string>
#include <vector>

#include "health/drive_reading.h"

namespace stallwatch::health {

enum class Verdict { kOk, kWarning, kFailing, kWornOut, kUnknown, kUnsupported };
const char* toString(Verdict v);

struct HealthEvidence {
  std::string counter;   // "ata 5 Reallocated_Sector_Ct raw", "nvme media_errors", ...
  std::string value;     // now
  std::string previous;  // at the last reading, "" if none
  std::string rule;      // why it matters
  Verdict implies = Verdict::kOk;
};

struct HealthVerdict {
  Verdict verdict = Verdict::kUnknown;
  std::vector<HealthEvidence> evidence;
};

// PREVIOUS: the same drive's last reading, for "rising" rules (may be null).
HealthVerdict judge(const DriveReading& now, const DriveReading* previous = nullptr);

}  // namespace stallwatch::health
