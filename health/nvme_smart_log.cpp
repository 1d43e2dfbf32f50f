#include "health/nvme_smart_log.h"

#include <cstring>

namespace stallwatch::health {
namespace {

uint128 le128(const uint8_t (&b)[16]) {
  uint128 v = 0;
  for (int i = 15; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

uint32_t le32(const uint8_t (&b)[4]) {
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

}  // namespace

std::optional<NvmeHealth> parseNvmeSmartLog(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(NvmeSmartLogPage)) return std::nullopt;
  NvmeSmartLogPage p;
  std::memcpy(&p, bytes.data(), sizeof p);  // no alignment or aliasing assumptions on BYTES
  NvmeHealth h;
  h.critical_warning = p.critical_warning;
  const int kelvin = p.composite_temperature[0] | p.composite_temperature[1] << 8;
  h.temperature_c = kelvin - 273;
  h.available_spare = p.available_spare;
  h.available_spare_threshold = p.available_spare_threshold;
  h.percentage_used = p.percentage_used;
  h.data_units_read = le128(p.data_units_read);
  h.data_units_written = le128(p.data_units_written);
  h.host_read_commands = le128(p.host_read_commands);
  h.host_write_commands = le128(p.host_write_commands);
  h.controller_busy_minutes = le128(p.controller_busy_time);
  h.power_cycles = le128(p.power_cycles);
  h.power_on_hours = le128(p.power_on_hours);
  h.unsafe_shutdowns = le128(p.unsafe_shutdowns);
  h.media_errors = le128(p.media_errors);
  h.error_log_entries = le128(p.error_log_entries);
  h.warning_temperature_minutes = le32(p.warning_temperature_time);
  h.critical_temperature_minutes = le32(p.critical_temperature_time);
  return h;
}

std::string toString(uint128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

const char* toString(DriveKind kind) {
  switch (kind) {
    case DriveKind::kAta:
      return "ata";
    case DriveKind::kNvme:
      return "nvme";
    case DriveKind::kScsi:
      return "scsi";
    case DriveKind::kUnknown:
      return "unknown";
  }
  return "?";
}

}  // namespace stallwatch::health
