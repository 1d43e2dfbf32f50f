// The NVMe SMART / Health Information log page (02h), 512 bytes, mirrored field by field
// from the NVMe Base Specification (2.0, figure 207) with its size and offsets checked at
// compile time. Counters are 128-bit little-endian.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "health/drive_reading.h"

namespace stallwatch::health {

struct NvmeSmartLogPage {
  uint8_t critical_warning;
  uint8_t composite_temperature[2];  // kelvins, little-endian
  uint8_t available_spare;
  uint8_t available_spare_threshold;
  uint8_t percentage_used;
  uint8_t endurance_group_critical_warning;
  uint8_t reserved7[25];
  uint8_t data_units_read[16];
  uint8_t data_units_written[16];
  uint8_t host_read_commands[16];
  uint8_t host_write_commands[16];
  uint8_t controller_busy_time[16];
  uint8_t power_cycles[16];
  uint8_t power_on_hours[16];
  uint8_t unsafe_shutdowns[16];
  uint8_t media_errors[16];
  uint8_t error_log_entries[16];
  uint8_t warning_temperature_time[4];
  uint8_t critical_temperature_time[4];
  uint8_t temperature_sensors[8][2];
  uint8_t reserved216[296];
};
static_assert(sizeof(NvmeSmartLogPage) == 512, "the log page is 512 bytes");
static_assert(offsetof(NvmeSmartLogPage, data_units_read) == 32);
static_assert(offsetof(NvmeSmartLogPage, power_on_hours) == 128);
static_assert(offsetof(NvmeSmartLogPage, media_errors) == 160);
static_assert(offsetof(NvmeSmartLogPage, error_log_entries) == 176);
static_assert(offsetof(NvmeSmartLogPage, warning_temperature_time) == 192);
static_assert(offsetof(NvmeSmartLogPage, temperature_sensors) == 200);

// Nullopt unless PAGE holds at least 512 bytes.
std::optional<NvmeHealth> parseNvmeSmartLog(std::span<const uint8_t> page);

}  // namespace stallwatch::health
