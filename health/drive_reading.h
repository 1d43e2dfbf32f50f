// One reading of a drive's own health records, whichever way it was read: the native ATA
// (libatasmart) and NVMe (log page 02h) readers and the smartctl JSON reader all produce
// this, so that one set of verdict rules judges them all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stallwatch::health {

__extension__ typedef unsigned __int128 uint128;
std::string toString(uint128 v);

enum class DriveKind { kAta, kNvme, kScsi, kUnknown };
const char* toString(DriveKind kind);

struct AtaAttribute {
  uint8_t id = 0;
  std::string name;
  uint8_t value = 0;  // normalized, 1..253, higher is better
  uint8_t worst = 0;
  uint8_t threshold = 0;  // 0: never fails
  uint64_t raw = 0;       // the 48-bit raw field as a number (vendor-defined encoding)
  bool prefailure = false;
  bool failing_now() const { return threshold > 0 && value <= threshold; }
  bool operator==(const AtaAttribute&) const = default;
};

// NVMe base specification, SMART / Health Information log page (Log Identifier 02h).
struct NvmeHealth {
  uint8_t critical_warning =
      0;  // bit 0 spare, 1 temperature, 2 reliability, 3 read-only, 4 volatile backup, 5 PMR
  int32_t temperature_c = 0;    // composite temperature (the page holds kelvins)
  uint8_t available_spare = 0;  // percent
  uint8_t available_spare_threshold = 0;
  uint8_t percentage_used = 0;  // may exceed 100
  uint128 data_units_read = 0;  // thousands of 512-byte units
  uint128 data_units_written = 0;
  uint128 host_read_commands = 0;
  uint128 host_write_commands = 0;
  uint128 controller_busy_minutes = 0;
  uint128 power_cycles = 0;
  uint128 power_on_hours = 0;
  uint128 unsafe_shutdowns = 0;
  uint128 media_errors = 0;
  uint128 error_log_entries = 0;
  uint32_t warning_temperature_minutes = 0;
  uint32_t critical_temperature_minutes = 0;
  bool operator==(const NvmeHealth&) const = default;
};

struct ScsiHealth {
  std::optional<uint64_t> grown_defects;
  std::optional<uint64_t> read_uncorrected;
  std::optional<uint64_t> write_uncorrected;
  std::optional<uint64_t> verify_uncorrected;
  std::optional<uint64_t> start_stop_cycles;
  std::optional<uint64_t> load_unload_cycles;
};

// The ATA error log (SMART READ LOG 01h, or the extended log 03h), as smartctl summarises it:
// how many errors the drive has counted over its life, and of the few it still holds (the last
// five for the summary log), how many were uncorrectable media errors (UNC, error register
// bit 6) and how many interface CRC errors (ICRC, bit 7: the cable or connector, not the media).
struct AtaErrorLog {
  uint64_t count = 0;
  uint64_t logged = 0;
  uint64_t unc_logged = 0;
  uint64_t icrc_logged = 0;
  std::optional<uint64_t> last_lifetime_hours;  // power-on hours of the newest logged error
  std::string last_description;                 // "Error: UNC at LBA = ..." where smartctl says
  bool operator==(const AtaErrorLog&) const = default;
};

struct DriveReading {
  std::string device;  // sda, nvme0n1, or the path smartctl named
  DriveKind kind = DriveKind::kUnknown;
  std::string source;  // "libatasmart", "nvme-log", "smartctl-json"
  std::string model;
  std::string serial;
  bool smart_available = false;
  std::optional<bool>
      passed;  // the drive's own overall verdict (ATA SMART RETURN STATUS, smartctl)
  std::optional<double> temperature_c;
  std::optional<uint64_t> power_on_hours;
  std::vector<AtaAttribute> ata;
  std::optional<NvmeHealth> nvme;
  std::optional<ScsiHealth> scsi;
  std::optional<AtaErrorLog> ata_error_log;  // smartctl JSON only: libatasmart does not read it
  std::optional<int> smartctl_exit_status;
  std::string note;  // why there is nothing to judge (no SMART, open failed, a scan listing)

  const AtaAttribute* attribute(uint8_t id) const {
    for (const auto& a : ata) {
      if (a.id == id) return &a;
    }
    return nullptr;
  }
};

}  // namespace stallwatch::health
