// `stallwatch report --db A --db B ...`: the post-mortem of a run across nodes, from each
// node's recording (or export). Computed once, rendered as text, JSON or HTML.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "correlator/fleet.h"
#include "storage/recording.h"
#include "storage/runs_across_nodes.h"

namespace stallwatch::cli {

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
};

struct FleetInputs {
  std::vector<std::string> paths;     // the recordings read
  std::vector<std::string> problems;  // what could not be read, and why: said in the report
  size_t opened = 0;                  // recordings read
};

// The recordings ARGS name: files, directories (every *.db in them) and glob patterns.
FleetInputs recordingPaths(const std::vector<std::string>& args);

// The runs across INPUTS' recordings (only RUN_ID's when given: an id as `export --run-id`
// takes it), each over RANGE. Recordings that cannot be read are added to INPUTS.problems.
std::vector<FleetReport> buildFleetReports(FleetInputs& inputs, const std::string& run_id,
                                           const storage::TimeRange& range);

std::string renderFleetText(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
nlohmann::json renderFleetJson(const std::vector<FleetReport>& reports, const FleetInputs& inputs);
std::string renderFleetHtml(const std::vector<FleetReport>& reports, const FleetInputs& inputs,
                            const std::string& title);

}  // namespace stallwatch::cli
