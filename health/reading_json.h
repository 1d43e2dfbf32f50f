// Drive readings and verdicts as JSON: how the DB keeps a reading (so that the next one can
// be compared with it) and what `stallwatch health --json` prints. 128-bit NVMe counters
// are decimal strings, exact.
#pragma once

#include <nlohmann/json.hpp>

#include "health/drive_reading.h"
#include "health/verdict.h"

namespace stallwatch::health {

nlohmann::json toJson(const DriveReading& reading);
DriveReading readingFromJson(const nlohmann::json& j);  // tolerant: missing fields stay empty
nlohmann::json toJson(const HealthVerdict& verdict);

}  // namespace stallwatch::health
