#include "model/incident_json.h"

namespace stallwatch::model {

nlohmann::json evidenceItemJson(const EvidenceItem& e) {
  auto text = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  const bool typed = !e.name.metric.empty();
  const std::string unit = typed ? unitOf(e.name.metric) : "";
  return {{"signal", e.signal},          {"metric", text(e.name.metric)},
          {"scope", text(e.name.scope)}, {"subject", text(e.name.subject)},
          {"note", text(e.name.note)},   {"unit", text(unit)},
          {"baseline", e.baseline},      {"during", e.during},
          {"supports", e.supports}};
}

}  // namespace stallwatch::model
