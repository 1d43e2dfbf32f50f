// A synchronous job across nodes, from each node's own recording: the nodes lined up on one
// time grid (their clocks checked against each other from the data), judged as one job whose
// "ranks" are the nodes, and each stall explained on the series of the node that held the job
// back by the same attribution as within a node. Pure computation like the rest of the
// correlator: the nodes' samples come in through a NodeReader and NodeWindow.
//
// No node's day is held whole: each node is read twice, a row at a time (its progress, to check
// its clock; then all it is judged by, merged onto the grid as it comes), and kept as
// NodeColumns at 4 bytes a value. The nodes' figures are put back into model::Series only
// around each stall, to find the node that held the job back. A run too long or too wide for
// FleetOptions::max_series_bytes is judged on a coarser grid (docs/MEASUREMENTS.md: a day of a
// node takes about 3 MiB).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "correlator/postmortem.h"
#include "correlator/stall_detector.h"
#include "model/fleet.h"
#include "model/node_sample.h"

namespace stallwatch::correlator {

// The records the fleet analysis fills (model/fleet.h).
using model::ClockCheck;
using model::FleetAnalysis;
using model::FleetIncident;
using model::NodeCause;
using model::NodeColumns;

// A node of the run, as known before its samples are read.
struct FleetNode {
  std::string node;            // its host name
  std::vector<int32_t> ranks;  // the global ranks it ran; empty if its recording does not say
  uint32_t gpu_count = 0;
  uint32_t pid = 0;  // its lowest rank's main process, where known
  std::string gpu;   // its first GPU's UUID, where known
};

// Reads node NODE's samples in time order, each to SINK, filling at least FIELDS. Called twice a
// node (its progress, then all), for several nodes at once from FleetOptions::threads threads.
using NodeReader = std::function<void(size_t node, model::NodeSampleFields fields,
                                      const model::NodeSampleSink& sink)>;

// One node's recording of the job, whole in memory (a node read from Prometheus).
struct NodeJob {
  std::string node;            // its host name
  std::vector<int32_t> ranks;  // the global ranks it ran; empty if its recording does not say
  // The node's summary series (storage's Recording::Detail::kNodeSummary): the job's figures on
  // this node, and one rank standing for the node's slowest.
  JobSeries summary;
};

struct FleetOptions {
  DetectorConfig detector;
  // The most the run's series on the grid may take, in bytes (0: no bound). Past it the grid is
  // coarsened, a whole multiple of the recordings' interval, until they fit.
  size_t max_series_bytes = 0;
  unsigned threads = 2;  // nodes read at once
};

// Node NODE's full series (its devices, ranks and the host's other devices) from FROM_MS to
// TO_MS by its own clock, to explain a stall on. NODE: its index among the nodes given.
using NodeWindow = std::function<JobSeries(size_t node, int64_t from_ms, int64_t to_ms)>;

// WORLD_SIZE, when known, lets the analysis say which ranks have no recording.
FleetAnalysis analyzeFleet(const std::vector<FleetNode>& nodes, const NodeReader& read,
                           const NodeWindow& window, std::optional<int32_t> world_size = {},
                           const FleetOptions& options = {});
// The same over summaries held in memory; each is freed once merged.
FleetAnalysis analyzeFleet(std::vector<NodeJob> nodes, const NodeWindow& window,
                           std::optional<int32_t> world_size = {},
                           const DetectorConfig& config = {});

// Lags up to this far (either way) are looked for when checking the nodes' clocks.
constexpr int64_t kMaxClockLagMs = 60'000;

}  // namespace stallwatch::correlator
