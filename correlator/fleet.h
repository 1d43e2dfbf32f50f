// A synchronous job across nodes, from each node's own recording: the nodes lined up on one
// time grid (their clocks checked against each other from the data), judged as one job whose
// "ranks" are the nodes, and each stall explained on the series of the node that held the job
// back by the same attribution as within a node. Pure computation like the rest of the
// correlator: the nodes' recordings come in as series and through NodeWindow.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

// One node's recording of the job.
struct NodeJob {
  std::string node;            // its host name
  std::vector<int32_t> ranks;  // the global ranks it ran; empty if its recording does not say
  // The node's summary series (storage's Recording::Detail::kNodeSummary): the job's figures on
  // this node, and one rank standing for the node's slowest.
  JobSeries summary;
};

// Whether a node's clock agrees with the first node's, judged from the data: a synchronous
// job's progress rises and falls on every node at once, so the lag at which two nodes' progress
// series match best is the difference between their clocks.
struct ClockCheck {
  std::string node;
  bool checked = false;    // false: the progress did not vary enough to tell
  int64_t offset_ms = 0;   // this node's clock minus the first node's (0 unless checked)
  double match = 0;        // the correlation of the two progress series at that lag
  bool corrected = false;  // beyond one interval: its samples were shifted back by the offset
};

// Node NODE's full series (its devices, ranks and the host's other devices) from FROM_MS to
// TO_MS by its own clock, to explain a stall on.
using NodeWindow = std::function<JobSeries(size_t node, int64_t from_ms, int64_t to_ms)>;

// A stall of the whole job, explained on a node.
struct NodeCause {
  size_t node = 0;
  Incident incident;  // attributed on that node's own series over the job's stall
};

struct FleetIncident {
  // On the job's grid. Class, device and evidence are the explaining node's (the straggler's,
  // or the most common among nodes that starved alike); the evidence starts with the per-node
  // comparisons that found the straggler. straggler: the rank that held the job back.
  // Its ranks are real ranks: the straggler, those that waited, or those that starved alike.
  Incident incident;
  std::optional<size_t> straggler_node;  // index in the nodes, when one node held the job back
  std::vector<size_t> starved_nodes;     // without one: the nodes that starved alike
  std::vector<NodeCause> causes;         // the straggler's, or every node's that starved
  double others_waited_s = 0;            // how long each other node waited: the stall's span
  double others_gpu_seconds = 0;         // their GPUs' capacity lost meanwhile
};

struct FleetAnalysis {
  // On the common grid, one "rank" per node: RankSeries::rank is the node's index, node its
  // host, its series the node's slowest rank's.
  JobSeries series;
  int64_t grid_ms = 1000;
  std::string clock_signal;  // what the clocks were compared by: "steps", "gpu_work", "gpu_util"
  std::vector<ClockCheck> clocks;
  std::vector<int32_t> missing_ranks;  // of WORLD_SIZE, ranks no node's recording holds
  Analysis analysis;
  std::vector<FleetIncident> incidents;
  double goodput = 1.0;
};

// WORLD_SIZE, when known, lets the analysis say which ranks have no recording.
// NODES are taken (their summaries are freed as they are merged: a day of sixteen nodes' is
// hundreds of MB).
FleetAnalysis analyzeFleet(std::vector<NodeJob> nodes, const NodeWindow& window,
                           std::optional<int32_t> world_size = {},
                           const DetectorConfig& config = {});

// Lags up to this far (either way) are looked for when checking the nodes' clocks.
constexpr int64_t kMaxClockLagMs = 60'000;

}  // namespace stallwatch::correlator
