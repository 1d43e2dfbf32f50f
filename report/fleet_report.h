// `stallwatch report --db A --db B ...` and `report --prometheus`: the post-mortem of a run
// across nodes, from each node's recording (or export), or from the Prometheus server its agents
// were scraped by; the records filled here (model/report.h) are said by render/fleet.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/report.h"
#include "prometheus/fleet_source.h"
#include "storage/recording.h"

namespace stallwatch::report {

// How far long work is, as a status line ("opening 3 of 40 recordings: ..."); "" when it is
// done. Called from the reading threads too: what it calls must be safe there.
using Progress = std::function<void(const std::string& status)>;

// The recordings ARGS name: files, directories (every *.db in them) and glob patterns.
model::FleetInputs recordingPaths(const std::vector<std::string>& args);

// The runs across INPUTS' recordings (only RUN_ID's when given: an id as `export --run-id`
// takes it), each over RANGE, the run's series on its grid within MAX_SERIES_BYTES (0: no bound;
// correlator::FleetOptions). Recordings that cannot be read are added to INPUTS.problems.
std::vector<model::FleetReport> buildFleetReports(model::FleetInputs& inputs,
                                                  const std::string& run_id,
                                                  const storage::TimeRange& range,
                                                  size_t max_series_bytes,
                                                  const Progress& progress = {});

// The run SELECTION names, read from a Prometheus-compatible server through CLIENT and judged
// by the same fleet correlator; none when the server holds no series of it in the span.
std::vector<model::FleetReport> buildPrometheusFleetReport(
    prometheus::Client& client, const prometheus::RunSelection& selection);

}  // namespace stallwatch::report
