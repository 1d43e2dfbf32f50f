// The standing verdict across a run's nodes (issue 41): each node's limiter, as its own report
// judges it (from its recording) or as its agent said it minute by minute (from Prometheus),
// and what they add up to: which node's input is slowest, and the GPU-hours the run spent
// waiting for input under each limiter.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "model/limiter.h"

namespace stallwatch::correlator {

struct FleetLimiters {
  // Each node's verdict, in the order of the nodes; none where it could not be judged.
  std::vector<std::optional<model::LimiterVerdict>> nodes;
  // The node whose loop waited most for input, among those whose input held them back.
  std::optional<size_t> slowest_input_node;
  // GPU-hours waiting for input across the run, by the limiter of the node that waited.
  std::array<double, model::kLimiterCount> wait_gpu_hours{};
  // The limiter most of the run's GPU-seconds were judged under (by the nodes' GPUs x seconds).
  std::optional<model::Limiter> run_limiter;
  // Not judged: the nodes' recordings in the range held more than a report judges node by node
  // (kNodeLimiterBudgetDays); how many node-days they held.
  std::optional<double> over_budget_node_days;
};

// Node-days of recordings (one-second samples) the report across nodes judges node by node:
// each costs about what the node's own report does (measured on 8 GPUs a node: ~1.2 s and
// ~100 MB a node-quarter-day, two nodes at a time; docs/MEASUREMENTS.md).
constexpr double kNodeLimiterBudgetDays = 8;

FleetLimiters summarizeFleetLimiters(std::vector<std::optional<model::LimiterVerdict>> nodes);

// The verdict that stands for the run's wait for input in its goodput: the slowest input's node,
// else the node whose measured wait was longest (the nodes of a synchronous run wait for the one
// that waits). None where no node was judged.
const model::LimiterVerdict* standingVerdictOf(const FleetLimiters& limiters);

}  // namespace stallwatch::correlator
