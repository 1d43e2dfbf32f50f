// The post-mortem of a run across nodes (`stallwatch report --db A --db B ...`), as computed
// once (cli/fleet_report.cpp) and rendered as text, JSON or HTML.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "correlator/fleet.h"
#include "correlator/fleet_limiters.h"
#include "storage/runs_across_nodes.h"

namespace stallwatch::render {

struct FleetNode {
  std::string name;  // its host, or host/file where two recordings name the same host
  std::string path;
  int64_t job_id = 0;
  std::vector<int32_t> ranks;
  uint32_t gpus = 0;
  size_t intervals = 0;
};

struct FleetReport {
  storage::RunAcrossNodes run;
  std::vector<FleetNode> nodes;
  correlator::FleetAnalysis analysis;
  correlator::FleetLimiters limiters;  // in the order of NODES
  // From Prometheus: the server's values refused (not finite, negative) and slots two series
  // filled with values that disagree (kept as none).
  size_t server_values_refused = 0, server_values_disagreeing = 0;
  // From Prometheus: the step asked for (--prometheus-step) where coarser than the samples'
  // own spacing, and that spacing; a stall shorter than the step may be missed.
  int64_t step_ms = 0, data_step_ms = 0;
};

struct FleetInputs {
  std::vector<std::string> paths;     // the recordings read
  std::vector<std::string> problems;  // what could not be read, and why: said in the report
  size_t opened = 0;                  // recordings read
};

std::string renderFleetText(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
nlohmann::json renderFleetJson(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
std::string renderFleetHtml(const std::vector<FleetReport>& reports, const FleetInputs& inputs,
                            const std::string& title);

}  // namespace stallwatch::render
