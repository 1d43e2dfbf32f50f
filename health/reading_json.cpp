#include "health/reading_json.h"

namespace stallwatch::health {
namespace {

using nlohmann::json;

uint128 parse128(const json& j, const char* key) {
  if (!j.contains(key)) return 0;
  const json& v = j[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (!v.is_string()) return 0;
  uint128 out = 0;
  for (char c : v.get<std::string>()) {
    if (c < '0' || c > '9') return 0;
    out = out * 10 + static_cast<unsigned>(c - '0');
  }
  return out;
}

template <typename T>
void putOptional(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
std::optional<T> getOptional(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

json toJson(const DriveReading& r) {
  json j = {{"device", r.device}, {"kind", toString(r.kind)},
            {"source", r.source}, {"model", r.model},
            {"serial", r.serial}, {"smart_available", r.smart_available}};
  putOptional(j, "passed", r.passed);
  putOptional(j, "temperature_c", r.temperature_c);
  putOptional(j, "power_on_hours", r.power_on_hours);
  putOptional(j, "smartctl_exit_status", r.smartctl_exit_status);
  if (!r.note.empty()) j["note"] = r.note;
  if (!r.ata.empty()) {
    json attrs = json::array();
    for (const auto& a : r.ata) {
      attrs.push_back({{"id", a.id},
                       {"name", a.name},
                       {"value", a.value},
                       {"worst", a.worst},
                       {"threshold", a.threshold},
                       {"raw", a.raw},
                       {"prefailure", a.prefailure}});
    }
    j["ata_attributes"] = attrs;
  }
  if (r.ata_error_log) {
    const AtaErrorLog& e = *r.ata_error_log;
    j["ata_error_log"] = {{"count", e.count},
                          {"logged", e.logged},
                          {"unc_logged", e.unc_logged},
                          {"icrc_logged", e.icrc_logged}};
    putOptional(j["ata_error_log"], "last_lifetime_hours", e.last_lifetime_hours);
    if (!e.last_description.empty()) j["ata_error_log"]["last_description"] = e.last_description;
  }
  if (r.nvme) {
    const NvmeHealth& n = *r.nvme;
    j["nvme"] = {{"critical_warning", n.critical_warning},
                 {"temperature_c", n.temperature_c},
                 {"available_spare", n.available_spare},
                 {"available_spare_threshold", n.available_spare_threshold},
                 {"percentage_used", n.percentage_used},
                 {"data_units_read", toString(n.data_units_read)},
                 {"data_units_written", toString(n.data_units_written)},
                 {"host_read_commands", toString(n.host_read_commands)},
                 {"host_write_commands", toString(n.host_write_commands)},
                 {"controller_busy_minutes", toString(n.controller_busy_minutes)},
                 {"power_cycles", toString(n.power_cycles)},
                 {"power_on_hours", toString(n.power_on_hours)},
                 {"unsafe_shutdowns", toString(n.unsafe_shutdowns)},
                 {"media_errors", toString(n.media_errors)},
                 {"error_log_entries", toString(n.error_log_entries)},
                 {"warning_temperature_minutes", n.warning_temperature_minutes},
                 {"critical_temperature_minutes", n.critical_temperature_minutes}};
  }
  if (r.scsi) {
    json s = json::object();
    putOptional(s, "grown_defects", r.scsi->grown_defects);
    putOptional(s, "read_uncorrected", r.scsi->read_uncorrected);
    putOptional(s, "write_uncorrected", r.scsi->write_uncorrected);
    putOptional(s, "verify_uncorrected", r.scsi->verify_uncorrected);
    putOptional(s, "start_stop_cycles", r.scsi->start_stop_cycles);
    putOptional(s, "load_unload_cycles", r.scsi->load_unload_cycles);
    j["scsi"] = s;
  }
  return j;
}

DriveReading readingFromJson(const json& j) {
  DriveReading r;
  if (!j.is_object()) return r;
  r.device = j.value("device", "");
  const std::string kind = j.value("kind", "");
  r.kind = kind == "ata"    ? DriveKind::kAta
           : kind == "nvme" ? DriveKind::kNvme
           : kind == "scsi" ? DriveKind::kScsi
                            : DriveKind::kUnknown;
  r.source = j.value("source", "");
  r.model = j.value("model", "");
  r.serial = j.value("serial", "");
  r.smart_available = j.value("smart_available", false);
  r.passed = getOptional<bool>(j, "passed");
  r.temperature_c = getOptional<double>(j, "temperature_c");
  r.power_on_hours = getOptional<uint64_t>(j, "power_on_hours");
  r.smartctl_exit_status = getOptional<int>(j, "smartctl_exit_status");
  r.note = j.value("note", "");
  if (j.contains("ata_attributes") && j["ata_attributes"].is_array()) {
    for (const auto& a : j["ata_attributes"]) {
      AtaAttribute x;
      x.id = getOptional<uint8_t>(a, "id").value_or(0);
      x.name = a.value("name", "");
      x.value = getOptional<uint8_t>(a, "value").value_or(0);
      x.worst = getOptional<uint8_t>(a, "worst").value_or(0);
      x.threshold = getOptional<uint8_t>(a, "threshold").value_or(0);
      x.raw = getOptional<uint64_t>(a, "raw").value_or(0);
      x.prefailure = a.value("prefailure", false);
      r.ata.push_back(std::move(x));
    }
  }
  if (j.contains("ata_error_log") && j["ata_error_log"].is_object()) {
    const json& e = j["ata_error_log"];
    AtaErrorLog log;
    log.count = getOptional<uint64_t>(e, "count").value_or(0);
    log.logged = getOptional<uint64_t>(e, "logged").value_or(0);
    log.unc_logged = getOptional<uint64_t>(e, "unc_logged").value_or(0);
    log.icrc_logged = getOptional<uint64_t>(e, "icrc_logged").value_or(0);
    log.last_lifetime_hours = getOptional<uint64_t>(e, "last_lifetime_hours");
    log.last_description = e.value("last_description", "");
    r.ata_error_log = log;
  }
  if (j.contains("nvme") && j["nvme"].is_object()) {
    const json& n = j["nvme"];
    NvmeHealth h;
    h.critical_warning = getOptional<uint8_t>(n, "critical_warning").value_or(0);
    h.temperature_c = getOptional<int32_t>(n, "temperature_c").value_or(0);
    h.available_spare = getOptional<uint8_t>(n, "available_spare").value_or(0);
    h.available_spare_threshold = getOptional<uint8_t>(n, "available_spare_threshold").value_or(0);
    h.percentage_used = getOptional<uint8_t>(n, "percentage_used").value_or(0);
    h.data_units_read = parse128(n, "data_units_read");
    h.data_units_written = parse128(n, "data_units_written");
    h.host_read_commands = parse128(n, "host_read_commands");
    h.host_write_commands = parse128(n, "host_write_commands");
    h.controller_busy_minutes = parse128(n, "controller_busy_minutes");
    h.power_cycles = parse128(n, "power_cycles");
    h.power_on_hours = parse128(n, "power_on_hours");
    h.unsafe_shutdowns = parse128(n, "unsafe_shutdowns");
    h.media_errors = parse128(n, "media_errors");
    h.error_log_entries = parse128(n, "error_log_entries");
    h.warning_temperature_minutes =
        getOptional<uint32_t>(n, "warning_temperature_minutes").value_or(0);
    h.critical_temperature_minutes =
        getOptional<uint32_t>(n, "critical_temperature_minutes").value_or(0);
    r.nvme = h;
  }
  if (j.contains("scsi") && j["scsi"].is_object()) {
    const json& s = j["scsi"];
    ScsiHealth h;
    h.grown_defects = getOptional<uint64_t>(s, "grown_defects");
    h.read_uncorrected = getOptional<uint64_t>(s, "read_uncorrected");
    h.write_uncorrected = getOptional<uint64_t>(s, "write_uncorrected");
    h.verify_uncorrected = getOptional<uint64_t>(s, "verify_uncorrected");
    h.start_stop_cycles = getOptional<uint64_t>(s, "start_stop_cycles");
    h.load_unload_cycles = getOptional<uint64_t>(s, "load_unload_cycles");
    r.scsi = h;
  }
  return r;
}

json toJson(const HealthVerdict& v) {
  json evidence = json::array();
  for (const auto& e : v.evidence) {
    evidence.push_back({{"counter", e.counter},
                        {"value", e.value},
                        {"previous", e.previous},
                        {"rule", e.rule},
                        {"implies", toString(e.implies)}});
  }
  return {{"verdict", toString(v.verdict)}, {"evidence", evidence}};
}

}  // namespace stallwatch::health
