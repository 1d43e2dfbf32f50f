#include "model/incident_json.h"

namespace stallwatch::model {

nlohmann::json evidenceItemJson(const EvidenceItem& e) {
  auto text = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  // A name this version does not know keeps its signal alone.
  const bool typed = e.name.metric != EvidenceMetric::kUnknown;
  auto typedText = [&](const std::string& s) { return typed ? text(s) : nlohmann::json(); };
  return {{"signal", e.signal},
          {"metric", typedText(toString(e.name.metric))},
          {"scope", typedText(toString(e.name.scope))},
          {"subject", typedText(e.name.subject)},
          {"note", typedText(e.name.remark())},
          {"unit", typedText(unitOf(e.name.metric))},
          {"baseline", e.baseline},
          {"during", e.during},
          {"supports", e.supports}};
}

}  // namespace stallwatch::model
