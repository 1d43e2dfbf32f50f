#include "health/smartctl_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace stallwatch::health {
namespace {

using nlohmann::json;

const json* find(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

std::optional<uint64_t> unsignedAt(const json& j, std::initializer_list<const char*> path) {
  const json* v = find(j, path);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    return i < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(i));
  }
  if (v->is_number_float()) {
    const double d = v->get<double>();
    return d < 0 || d > 1.8e19 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(d));
  }
  return std::nullopt;
}

// 128-bit NVMe counters: smartctl prints them as JSON numbers; past 2^64 they arrive as
// doubles (and smartctl adds a "_s" string twin in newer versions).
uint128 counter128(const json& log, const char* key) {
  const json* v = find(log, {key});
  if (!v) return 0;
  if (v->is_number_unsigned() || v->is_number_integer())
    return static_cast<uint128>(unsignedAt(log, {key}).value_or(0));
  if (v->is_number_float() && v->get<double>() > 0) return static_cast<uint128>(v->get<double>());
  return 0;
}

std::string stringAt(const json& j, std::initializer_list<const char*> path) {
  const json* v = find(j, path);
  return v && v->is_string() ? v->get<std::string>() : "";
}

DriveKind kindOf(const json& j) {
  const std::string protocol = stringAt(j, {"device", "protocol"});
  if (protocol == "ATA") return DriveKind::kAta;
  if (protocol == "NVMe") return DriveKind::kNvme;
  if (protocol == "SCSI") return DriveKind::kScsi;
  if (find(j, {"ata_smart_attributes"})) return DriveKind::kAta;
  if (find(j, {"nvme_smart_health_information_log"})) return DriveKind::kNvme;
  if (find(j, {"scsi_grown_defect_list"}) || find(j, {"scsi_error_counter_log"}))
    return DriveKind::kScsi;
  return DriveKind::kUnknown;
}

// ATA error register bits (ACS-3, 6.3): UNC an uncorrectable data error, ICRC an interface CRC
// error.
constexpr uint64_t kErrorUnc = 0x40;
constexpr uint64_t kErrorIcrc = 0x80;

// smartctl's "ata_smart_error_log": the extended log (-l xerror) when it was read, else the
// summary log (-l error). Entries that are not objects, or lack their registers, count as logged
// but neither UNC nor ICRC.
std::optional<AtaErrorLog> ataErrorLog(const json& j) {
  const json* log = find(j, {"ata_smart_error_log", "extended"});
  if (!log || !log->is_object()) log = find(j, {"ata_smart_error_log", "summary"});
  if (!log || !log->is_object()) return std::nullopt;
  AtaErrorLog out;
  out.count = unsignedAt(*log, {"count"}).value_or(0);
  const json* table = find(*log, {"table"});
  if (table && table->is_array()) {
    for (const auto& e : *table) {
      ++out.logged;
      if (!e.is_object()) continue;
      const uint64_t error = unsignedAt(e, {"completion_registers", "error"}).value_or(0);
      if (error & kErrorUnc) ++out.unc_logged;
      if (error & kErrorIcrc) ++out.icrc_logged;
      const auto hours = unsignedAt(e, {"lifetime_hours"});
      if (hours && (!out.last_lifetime_hours || *hours >= *out.last_lifetime_hours)) {
        out.last_lifetime_hours = hours;
        out.last_description = stringAt(e, {"error_description"});
      }
    }
  }
  out.count = std::max(out.count, out.logged);
  return out;
}

}  // namespace

SmartctlParse parseSmartctlJson(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() ||
      (!find(j, {"json_format_version"}) && !find(j, {"smartctl"}) && !find(j, {"device"}))) {
    throw std::invalid_argument(
        "JSON, but not smartctl's output (no json_format_version, smartctl or device)");
  }
  SmartctlParse out;
  DriveReading& r = out.reading;
  r.source = "smartctl-json";
  if (auto exit = unsignedAt(j, {"smartctl", "exit_status"}))
    r.smartctl_exit_status = static_cast<int>(*exit);

  if (const json* devices = find(j, {"devices"});
      devices && devices->is_array() && !find(j, {"device"})) {
    out.kind = SmartctlOutput::kScan;
    for (const auto& d : *devices) {
      const std::string name = d.is_object() ? stringAt(d, {"name"}) : "";
      if (!name.empty()) out.scanned.push_back(name);
    }
    r.note = "a device list (smartctl --scan), not a drive";
    return out;
  }
  // Exit status bit 1: the device could not be opened; messages say why.
  if (r.smartctl_exit_status && (*r.smartctl_exit_status & 0x2) && !find(j, {"device"})) {
    out.kind = SmartctlOutput::kOpenFailed;
    r.note = "smartctl could not open the device";
    if (const json* messages = find(j, {"smartctl", "messages"});
        messages && messages->is_array()) {
      for (const auto& m : *messages) {
        if (m.is_object() && m.contains("string") && m["string"].is_string())
          r.note = m["string"].get<std::string>();
      }
    }
    return out;
  }

  r.device = stringAt(j, {"device", "name"});
  r.kind = kindOf(j);
  r.model = stringAt(j, {"model_name"});
  if (r.model.empty()) r.model = stringAt(j, {"product"});
  r.serial = stringAt(j, {"serial_number"});
  if (const json* passed = find(j, {"smart_status", "passed"}); passed && passed->is_boolean()) {
    r.passed = passed->get<bool>();
  }
  if (const json* t = find(j, {"temperature", "current"});
      t && t->is_number() && t->get<double>() > 0) {
    r.temperature_c = t->get<double>();
  }
  r.power_on_hours = unsignedAt(j, {"power_on_time", "hours"});
  // smart_support.available in newer versions; a bare boolean in some older ones.
  if (const json* s = find(j, {"smart_support"})) {
    if (s->is_boolean()) {
      r.smart_available = s->get<bool>();
    } else if (const json* a = find(*s, {"available"}); a && a->is_boolean()) {
      r.smart_available = a->get<bool>();
    }
  }

  if (const json* table = find(j, {"ata_smart_attributes", "table"}); table && table->is_array()) {
    r.smart_available = true;
    for (const auto& e : *table) {
      if (!e.is_object()) continue;
      const auto id = unsignedAt(e, {"id"});
      if (!id || *id == 0 || *id > 255) continue;
      AtaAttribute a;
      a.id = static_cast<uint8_t>(*id);
      a.name = stringAt(e, {"name"});
      a.value = static_cast<uint8_t>(std::min<uint64_t>(unsignedAt(e, {"value"}).value_or(0), 255));
      a.worst = static_cast<uint8_t>(std::min<uint64_t>(unsignedAt(e, {"worst"}).value_or(0), 255));
      a.threshold =
          static_cast<uint8_t>(std::min<uint64_t>(unsignedAt(e, {"thresh"}).value_or(0), 255));
      a.raw = unsignedAt(e, {"raw", "value"}).value_or(0) & 0xFFFF'FFFF'FFFFull;
      const json* pre = find(e, {"flags", "prefailure"});
      a.prefailure = pre && pre->is_boolean() && pre->get<bool>();
      r.ata.push_back(std::move(a));
    }
  }
  r.ata_error_log = ataErrorLog(j);
  if (const json* log = find(j, {"nvme_smart_health_information_log"}); log && log->is_object()) {
    r.smart_available = true;
    NvmeHealth n;
    n.critical_warning =
        static_cast<uint8_t>(unsignedAt(*log, {"critical_warning"}).value_or(0) & 0xFF);
    if (const json* t = find(*log, {"temperature"}); t && t->is_number())
      n.temperature_c = t->get<int32_t>();
    n.available_spare = static_cast<uint8_t>(
        std::min<uint64_t>(unsignedAt(*log, {"available_spare"}).value_or(0), 255));
    n.available_spare_threshold = static_cast<uint8_t>(
        std::min<uint64_t>(unsignedAt(*log, {"available_spare_threshold"}).value_or(0), 255));
    n.percentage_used = static_cast<uint8_t>(
        std::min<uint64_t>(unsignedAt(*log, {"percentage_used"}).value_or(0), 255));
    n.data_units_read = counter128(*log, "data_units_read");
    n.data_units_written = counter128(*log, "data_units_written");
    n.host_read_commands = counter128(*log, "host_reads");
    n.host_write_commands = counter128(*log, "host_writes");
    n.controller_busy_minutes = counter128(*log, "controller_busy_time");
    n.power_cycles = counter128(*log, "power_cycles");
    n.power_on_hours = counter128(*log, "power_on_hours");
    n.unsafe_shutdowns = counter128(*log, "unsafe_shutdowns");
    n.media_errors = counter128(*log, "media_errors");
    n.error_log_entries = counter128(*log, "num_err_log_entries");
    n.warning_temperature_minutes =
        static_cast<uint32_t>(unsignedAt(*log, {"warning_temp_time"}).value_or(0));
    n.critical_temperature_minutes =
        static_cast<uint32_t>(unsignedAt(*log, {"critical_comp_time"}).value_or(0));
    r.nvme = n;
    if (!r.temperature_c) r.temperature_c = n.temperature_c;
  }
  if (r.kind == DriveKind::kScsi) {
    ScsiHealth s;
    s.grown_defects = unsignedAt(j, {"scsi_grown_defect_list"});
    s.read_uncorrected =
        unsignedAt(j, {"scsi_error_counter_log", "read", "total_uncorrected_errors"});
    s.write_uncorrected =
        unsignedAt(j, {"scsi_error_counter_log", "write", "total_uncorrected_errors"});
    s.verify_uncorrected =
        unsignedAt(j, {"scsi_error_counter_log", "verify", "total_uncorrected_errors"});
    s.start_stop_cycles =
        unsignedAt(j, {"scsi_start_stop_cycle_counter", "accumulated_start_stop_cycles"});
    s.load_unload_cycles =
        unsignedAt(j, {"scsi_start_stop_cycle_counter", "accumulated_load_unload_cycles"});
    const bool any = s.grown_defects || s.read_uncorrected || s.write_uncorrected ||
                     s.verify_uncorrected || s.start_stop_cycles || s.load_unload_cycles;
    if (any) {
      r.smart_available = true;
      r.scsi = s;
    } else if (!r.passed) {
      r.note =
          "no SMART or error counter data in the output (a RAID volume, or a device without SMART)";
    }
  }
  return out;
}

}  // namespace stallwatch::health
