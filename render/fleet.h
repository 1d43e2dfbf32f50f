// The post-mortem of a run across nodes (`stallwatch report --db A --db B ...`), as computed
// once (report/fleet_report.h) and rendered as text, JSON or HTML.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/report.h"

namespace stallwatch::render {

using model::FleetInputs;
using model::FleetReport;

std::string renderFleetText(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
nlohmann::json renderFleetJson(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
std::string renderFleetHtml(const std::vector<FleetReport>& reports, const FleetInputs& inputs,
                            const std::string& title);

}  // namespace stallwatch::render
