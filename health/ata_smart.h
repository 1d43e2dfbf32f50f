// ATA/SATA SMART through libatasmart (Debian's libatasmart-dev). A drive is read with SMART
// READ DATA, READ THRESHOLDS and RETURN STATUS; libatasmart keeps what the drive returned as
// a "blob" (tagged sections: IDENTIFY, status, data, thresholds), and every reading goes
// through that blob: the live path takes it from the drive, the tests build it from the
// values of real drives' smartctl output. One parsing path for both.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "health/drive_reading.h"

namespace stallwatch::health {

// Fills READING's ata attributes, passed, temperature and power-on hours from a libatasmart
// blob. False (with ERROR) if libatasmart rejects it.
bool parseAtaSmartBlob(std::span<const uint8_t> blob, DriveReading& reading, std::string& error);

// Builds a blob as libatasmart stores it: the 512-byte SMART data block (attribute table at
// offset 2, 12 bytes each: id, flags, value, worst, 6-byte raw), the thresholds block, an
// IDENTIFY block that says SMART is supported, and the RETURN STATUS verdict if known.
std::vector<uint8_t> buildAtaSmartBlob(const std::vector<AtaAttribute>& attributes,
                                       std::optional<bool> passed);

// Reads /dev/NAME. Does not wake a drive in standby (note says so). False with ERROR (errno
// text; EACCES means root or CAP_SYS_RAWIO is needed).
bool readAtaDrive(const std::string& dev_path, DriveReading& reading, std::string& error);

}  // namespace stallwatch::health
