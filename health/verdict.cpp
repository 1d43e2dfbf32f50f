#include "health/verdict.h"

#include <algorithm>

namespace stallwatch::health {
namespace {

// Failing outranks worn-out outranks warning outranks ok.
int rank(Verdict v) {
  switch (v) {
    case Verdict::kFailing:
      return 4;
    case Verdict::kWornOut:
      return 3;
    case Verdict::kWarning:
      return 2;
    case Verdict::kOk:
      return 1;
    default:
      return 0;
  }
}

struct Judge {
  HealthVerdict result{Verdict::kOk, {}};
  void add(std::string counter, std::string value, std::string previous, std::string rule,
           Verdict implies) {
    result.evidence.push_back(
        {std::move(counter), std::move(value), std::move(previous), std::move(rule), implies});
    if (rank(implies) > rank(result.verdict)) result.verdict = implies;
  }
  // A counter that must stay at zero: above zero → warning; up since the last reading → failing.
  template <typename T>
  void counter(const std::string& name, T now, std::optional<T> before, const std::string& why) {
    const std::string previous = before ? toString(*before) : "";
    if (before && now > *before) {
      add(name, toString(now), previous, why + "; rising since the last reading",
          Verdict::kFailing);
    } else if (now > 0) {
      add(name, toString(now), previous, why, Verdict::kWarning);
    }
  }
  static std::string toString(uint64_t v) { return std::to_string(v); }
  static std::string toString(uint128 v) { return health::toString(v); }
};

// The ATA attributes that predict failure from their first count (Backblaze, 2016; the
// annualised failure rates Scrutiny publishes from Backblaze's data: 5, 187, 197 and 198 rise
// from about 2.5-2.9 % at zero to 7.5-81 % from the first few counts).
constexpr uint8_t kAtaCounters[] = {5, 187, 197, 198};

// 188 Command_Timeout is in Backblaze's five, but its field data do not support "above zero":
// drives with 0-99 timeouts fail at 2.5 % a year (95 % interval 2.1-2.9 %), the rate of drives
// with no reallocated sector; from 100 on, at 10 % (8.1-12.3 %). Low counts follow a cable or
// controller hiccup, and smartctl and Scrutiny pass them. So a warning from 100.
constexpr uint8_t kCommandTimeout = 188;
constexpr uint64_t kCommandTimeoutWarning = 100;

uint64_t ataCount(const AtaAttribute& a) {
  // 188 (Command_Timeout): Seagate packs three 16-bit counters into the raw field; the
  // lowest is the count of all timeouts. Others: the raw value as a number.
  return a.id == 188 ? (a.raw & 0xFFFF) : a.raw;
}

std::string attributeLabel(const AtaAttribute& a) {
  return "ata " + std::to_string(a.id) + " " + a.name;
}

// The drive's own error log: new entries since the last reading, or an uncorrectable (UNC)
// error among those it holds, make a warning, as new NVMe error log entries do. Interface CRC
// errors alone (the cable or connector) and old entries are shown, not judged.
void judgeErrorLog(Judge& j, const AtaErrorLog& log, const std::optional<AtaErrorLog>& before) {
  if (log.count == 0) return;
  std::string what = std::to_string(log.count) + (log.count == 1 ? " error" : " errors") +
                     " over the drive's life";
  if (log.logged > 0) {
    what += "; of the last " + std::to_string(log.logged) + ": " + std::to_string(log.unc_logged) +
            " uncorrectable (UNC), " + std::to_string(log.icrc_logged) + " interface CRC (ICRC)";
  }
  if (log.last_lifetime_hours) {
    what += "; newest at power-on hour " + std::to_string(*log.last_lifetime_hours);
    if (!log.last_description.empty()) what += " (" + log.last_description + ")";
  }
  const std::string previous = before ? std::to_string(before->count) : "";
  if (before && log.count > before->count) {
    j.add("ata error log", std::to_string(log.count), previous,
          "new errors logged since the last reading: " + what, Verdict::kWarning);
  } else if (log.unc_logged > 0) {
    j.add("ata error log", std::to_string(log.count), previous,
          "uncorrectable media errors among the logged ones: " + what, Verdict::kWarning);
  } else {
    j.add("ata error log", std::to_string(log.count), previous,
          "no uncorrectable errors logged, none new: " + what, Verdict::kOk);
  }
}

}  // namespace

const char* toString(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kWarning:
      return "warning";
    case Verdict::kFailing:
      return "failing";
    case Verdict::kWornOut:
      return "worn-out";
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kUnsupported:
      return "unsupported";
  }
  return "?";
}

HealthVerdict judge(const DriveReading& now, const DriveReading* previous) {
  const bool has_data = !now.ata.empty() || now.nvme || now.scsi || now.passed.has_value();
  if (!has_data) {
    HealthVerdict v;
    v.verdict = now.smart_available || now.kind != DriveKind::kUnknown ? Verdict::kUnknown
                                                                       : Verdict::kUnsupported;
    if (!now.note.empty()) v.evidence.push_back({"note", now.note, "", "", v.verdict});
    return v;
  }
  Judge j;
  if (now.passed == false) {
    j.add("overall status", "FAILED", "", "the drive's own SMART self-assessment",
          Verdict::kFailing);
  }
  if (now.smartctl_exit_status && (*now.smartctl_exit_status & (1 << 3))) {
    j.add("smartctl exit status", std::to_string(*now.smartctl_exit_status), "",
          "bit 3: disk failing", Verdict::kFailing);
  }

  for (const auto& a : now.ata) {
    if (a.prefailure && a.failing_now()) {
      j.add(attributeLabel(a) + " value", std::to_string(a.value), "",
            "pre-failure attribute at or below its threshold " + std::to_string(a.threshold),
            Verdict::kFailing);
    }
  }
  for (uint8_t id : kAtaCounters) {
    const AtaAttribute* a = now.attribute(id);
    if (!a) continue;
    std::optional<uint64_t> before;
    if (previous) {
      if (const AtaAttribute* p = previous->attribute(id)) before = ataCount(*p);
    }
    j.counter(attributeLabel(*a) + " raw", ataCount(*a), before,
              "predicts failure (Backblaze; Pinheiro et al.)");
  }
  if (const AtaAttribute* a = now.attribute(kCommandTimeout)) {
    const uint64_t count = ataCount(*a);
    const AtaAttribute* p = previous ? previous->attribute(kCommandTimeout) : nullptr;
    const std::string before = p ? std::to_string(ataCount(*p)) : "";
    if (count >= kCommandTimeoutWarning) {
      j.add(attributeLabel(*a) + " raw", std::to_string(count), before,
            "100 or more command timeouts: 10 % annual failures in field data, against 2.5 % "
            "below 100",
            Verdict::kWarning);
    } else if (count > 0) {
      j.add(attributeLabel(*a) + " raw", std::to_string(count), before,
            "below 100: no more failures than a drive without timeouts in field data (a cable "
            "or controller hiccup)",
            Verdict::kOk);
    }
  }
  if (now.ata_error_log)
    judgeErrorLog(j, *now.ata_error_log, previous ? previous->ata_error_log : std::nullopt);

  if (now.nvme) {
    const NvmeHealth& n = *now.nvme;
    const NvmeHealth* p = previous && previous->nvme ? &*previous->nvme : nullptr;
    if (n.critical_warning != 0) {
      static const char* bits[] = {"available spare below threshold",
                                   "temperature",
                                   "reliability degraded",
                                   "read-only",
                                   "volatile memory backup failed",
                                   "persistent memory region read-only"};
      std::string what;
      for (int b = 0; b < 6; ++b) {
        if (n.critical_warning & (1 << b))
          what += (what.empty() ? "" : ", ") + std::string(bits[b]);
      }
      j.add("nvme critical_warning", std::to_string(n.critical_warning),
            p ? std::to_string(p->critical_warning) : "", what, Verdict::kFailing);
    }
    if (n.available_spare < n.available_spare_threshold) {
      j.add("nvme available_spare", std::to_string(n.available_spare) + " %", "",
            "below its threshold " + std::to_string(n.available_spare_threshold) + " %",
            Verdict::kFailing);
    }
    j.counter("nvme media_errors", n.media_errors,
              p ? std::optional<uint128>(p->media_errors) : std::nullopt,
              "unrecovered data integrity errors");
    if (p && n.error_log_entries > p->error_log_entries) {
      j.add("nvme error_log_entries", toString(n.error_log_entries), toString(p->error_log_entries),
            "new error log entries since the last reading", Verdict::kWarning);
    }
    if (n.percentage_used >= 100) {
      j.add("nvme percentage_used", std::to_string(n.percentage_used) + " %", "",
            "rated endurance consumed", Verdict::kWornOut);
    }
  }

  if (now.scsi) {
    const ScsiHealth& s = *now.scsi;
    const ScsiHealth* p = previous && previous->scsi ? &*previous->scsi : nullptr;
    auto scsiCounter = [&](const char* name, const std::optional<uint64_t>& v,
                           std::optional<uint64_t> ScsiHealth::*field, const char* why) {
      if (!v) return;
      j.counter(std::string("scsi ") + name, *v, p ? (*p).*field : std::nullopt, why);
    };
    scsiCounter("grown_defects", s.grown_defects, &ScsiHealth::grown_defects,
                "sectors remapped after manufacture");
    scsiCounter("read_uncorrected", s.read_uncorrected, &ScsiHealth::read_uncorrected,
                "uncorrected read errors");
    scsiCounter("write_uncorrected", s.write_uncorrected, &ScsiHealth::write_uncorrected,
                "uncorrected write errors");
    scsiCounter("verify_uncorrected", s.verify_uncorrected, &ScsiHealth::verify_uncorrected,
                "uncorrected verify errors");
  }
  return j.result;
}

}  // namespace stallwatch::health
