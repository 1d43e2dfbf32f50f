// An incident's evidence item as JSON, the one shape every output gives it in (the DB's
// evidence column, every --json, hook and webhook payloads).
#pragma once

#include <nlohmann/json.hpp>

#include "model/incident.h"

namespace stallwatch::model {

// The signal as people read it, its typed name (metric, scope, subject, note, unit; null where an
// older recording has the signal alone), the medians and whether it crossed its threshold.
nlohmann::json evidenceItemJson(const EvidenceItem& item);

}  // namespace stallwatch::model
