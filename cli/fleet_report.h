// `stallwatch report --db A --db B ...`: the post-mortem of a run across nodes, from each
// node's recording (or export). Computed here, rendered by render/fleet.h.
#pragma once

#include <string>
#include <vector>

#include "prometheus/fleet_source.h"
#include "render/fleet.h"
#include "storage/recording.h"

namespace stallwatch::cli {

// The recordings ARGS name: files, directories (every *.db in them) and glob patterns.
render::FleetInputs recordingPaths(const std::vector<std::string>& args);

// The runs across INPUTS' recordings (only RUN_ID's when given: an id as `export --run-id`
// takes it), each over RANGE, the run's series on its grid within MAX_SERIES_BYTES (0: no bound;
// correlator::FleetOptions). Recordings that cannot be read are added to INPUTS.problems.
std::vector<render::FleetReport> buildFleetReports(render::FleetInputs& inputs,
                                                   const std::string& run_id,
                                                   const storage::TimeRange& range,
                                                   size_t max_series_bytes);

// The run SELECTION names, read from a Prometheus-compatible server through CLIENT and judged
// by the same fleet correlator; none when the server holds no series of it in the span.
std::vector<render::FleetReport> buildPrometheusFleetReport(
    prometheus::Client& client, const prometheus::RunSelection& selection);

}  // namespace stallwatch::cli
