#include "agent/incident_payload.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "model/incident_json.h"
#include "storage/incident_store.h"

namespace stallwatch::agent {
namespace {

using model::IncidentEvent;
using model::IncidentEventKind;

std::string verb(IncidentEventKind kind) {
  switch (kind) {
    case IncidentEventKind::kOpen:
      return "opened";
    case IncidentEventKind::kChange:
      return "changed";
    case IncidentEventKind::kClose:
      return "closed";
  }
  return "?";
}

std::string deviceText(const model::IncidentEvent& e) {
  const model::Incident& i = e.incident;
  if (i.device.empty()) return "";
  return (i.physical_device.empty() ? i.device : i.device + " (on " + i.physical_device + ")") +
         (e.served_by.empty() ? "" : " [" + e.served_by + "]");
}

// The strongest supporting evidence, "await_ms loop0 41.2 vs 0.4 normal".
std::string evidenceText(const model::Incident& i) {
  for (const auto& e : i.evidence) {
    if (e.supports)
      return fmt::format("{} {:.3g} vs {:.3g} normal", e.signal, e.during, e.baseline);
  }
  return "";
}

}  // namespace

std::string isoTime(int64_t ms) {
  const time_t seconds = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buffer, static_cast<int>(ms % 1000));
}

std::string incidentSummary(const IncidentEvent& e, const std::string& host) {
  const auto& i = e.incident;
  std::string text =
      fmt::format("stall {} on {}: job '{}' lost {:.0f} % of its progress", verb(e.kind), host,
                  e.job_label.empty() ? e.job_key : e.job_label, i.idle_share * 100);
  if (e.kind == IncidentEventKind::kClose) {
    text +=
        fmt::format(" for {:.0f}s ({} to {})", static_cast<double>(i.end_ms - i.start_ms) / 1000.0,
                    isoTime(i.start_ms).substr(11, 8), isoTime(i.end_ms).substr(11, 8) + "Z");
  } else {
    text += " since " + isoTime(i.start_ms).substr(11, 8) + "Z";
  }
  text += std::string("; ") + model::toString(i.cls);
  if (const std::string d = deviceText(e); !d.empty()) text += " on " + d;
  if (e.kind == IncidentEventKind::kChange) {
    text += " (was " + e.previous_class +
            (e.previous_device.empty() ? "" : " on " + e.previous_device) + ")";
  }
  if (const std::string ev = evidenceText(i); !ev.empty()) text += ": " + ev;
  if (const std::string ranks = correlator::rankSummary(i); !ranks.empty()) text += "; " + ranks;
  return text;
}

namespace {

nlohmann::json eventObject(const IncidentEvent& e, const std::string& host) {
  const auto& i = e.incident;
  nlohmann::json evidence = nlohmann::json::array();
  for (const auto& item : i.evidence) evidence.push_back(model::evidenceItemJson(item));
  nlohmann::json j = {
      {"event", model::toString(e.kind)},
      {"incident_id", e.live_id},
      {"time", isoTime(e.ts_ms)},
      {"ts_ms", e.ts_ms},
      {"host", host},
      {"job", {{"key", e.job_key}, {"label", e.job_label}}},
      {"class", model::toString(i.cls)},
      {"device", i.device},
      {"physical_device", i.physical_device},
      {"served_by", e.served_by},
      {"start", isoTime(i.start_ms)},
      {"start_ms", i.start_ms},
      {"end_ms", i.end_ms},
      {"duration_seconds", static_cast<double>(i.end_ms - i.start_ms) / 1000.0},
      {"idle_share", i.idle_share},
      {"gpu_seconds_lost", i.gpu_seconds_lost},
      {"confidence", i.confidence},
      {"evidence", evidence},
      {"straggler", i.straggler ? nlohmann::json{{"rank", i.straggler->rank},
                                                 {"pid", i.straggler->pid},
                                                 {"gpu", i.straggler->gpu}}
                                : nlohmann::json(nullptr)},
      {"waiting_ranks", i.waiting_ranks},
      {"ranks_starved", i.ranks_starved},
      {"summary", incidentSummary(e, host)},
  };
  if (e.kind == IncidentEventKind::kChange) {
    j["previous"] = {{"class", e.previous_class}, {"device", e.previous_device}};
  }
  return j;
}

}  // namespace

std::string incidentJson(const IncidentEvent& e, const std::string& host) {
  // Labels come from command lines: replace invalid UTF-8 rather than throw.
  return eventObject(e, host).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::pair<std::string, std::string>> incidentEnvironment(const IncidentEvent& e,
                                                                     const std::string& host) {
  const auto& i = e.incident;
  std::vector<std::pair<std::string, std::string>> env = {
      {"STALLWATCH_EVENT", model::toString(e.kind)},
      {"STALLWATCH_INCIDENT_ID", std::to_string(e.live_id)},
      {"STALLWATCH_HOST", host},
      {"STALLWATCH_JOB", e.job_key},
      {"STALLWATCH_JOB_LABEL", e.job_label},
      {"STALLWATCH_CLASS", model::toString(i.cls)},
      {"STALLWATCH_DEVICE", i.device},
      {"STALLWATCH_PHYSICAL_DEVICE", i.physical_device},
      {"STALLWATCH_SERVED_BY", e.served_by},
      {"STALLWATCH_START", isoTime(i.start_ms)},
      {"STALLWATCH_START_MS", std::to_string(i.start_ms)},
      {"STALLWATCH_END_MS", std::to_string(i.end_ms)},
      {"STALLWATCH_IDLE_SHARE", fmt::format("{:.3f}", i.idle_share)},
      {"STALLWATCH_CONFIDENCE", fmt::format("{:.2f}", i.confidence)},
      {"STALLWATCH_SUMMARY", incidentSummary(e, host)},
      {"STALLWATCH_STRAGGLER_RANK", i.straggler ? std::to_string(i.straggler->rank) : ""},
      {"STALLWATCH_STRAGGLER_PID", i.straggler ? std::to_string(i.straggler->pid) : ""},
      {"STALLWATCH_STRAGGLER_GPU", i.straggler ? i.straggler->gpu : ""},
  };
  if (e.kind == IncidentEventKind::kChange) {
    env.emplace_back("STALLWATCH_PREVIOUS_CLASS", e.previous_class);
    env.emplace_back("STALLWATCH_PREVIOUS_DEVICE", e.previous_device);
  }
  return env;
}

std::string webhookBody(const IncidentEvent& e, const std::string& host) {
  const auto& i = e.incident;
  const bool resolved = e.kind == IncidentEventKind::kClose;
  const std::string status = resolved ? "resolved" : "firing";
  const nlohmann::json labels = {
      {"alertname", "StallwatchStall"},       {"instance", host},   {"job_key", e.job_key},
      {"class", model::toString(i.cls)},      {"device", i.device}, {"severity", "warning"},
      {"rank", correlator::stallRankLabel(i)}};
  const std::string summary = incidentSummary(e, host);
  const nlohmann::json annotations = {
      {"summary", summary}, {"job_label", e.job_label}, {"physical_device", i.physical_device}};
  const nlohmann::json alert = {
      {"status", status},
      {"labels", labels},
      {"annotations", annotations},
      {"startsAt", isoTime(i.start_ms)},
      {"endsAt", resolved ? isoTime(i.end_ms) : "0001-01-01T00:00:00Z"},
      {"generatorURL", ""},
      {"fingerprint", fmt::format("{}-{}", host, e.live_id)},
  };
  const nlohmann::json body = {
      {"version", "4"},           {"groupKey", "stallwatch/" + host + "/" + e.job_key},
      {"truncatedAlerts", 0},     {"status", status},
      {"receiver", "stallwatch"}, {"groupLabels", {{"alertname", "StallwatchStall"}}},
      {"commonLabels", labels},   {"commonAnnotations", annotations},
      {"externalURL", ""},        {"alerts", nlohmann::json::array({alert})},
      {"text", summary},          {"stallwatch", eventObject(e, host)},
  };
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace stallwatch::agent
