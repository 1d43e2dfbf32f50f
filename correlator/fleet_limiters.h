// The standing verdict across a run's nodes (issue 41): each node's limiter, as its own report
// judges it (from its recording) or as its agent said it minute by minute (from Prometheus),
// and what they add up to: which node's input is slowest, and the GPU-hours the run spent
// waiting for input under each limiter.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "model/fleet.h"
#include "model/limiter.h"

namespace stallwatch::correlator {

using model::FleetLimiters;
using model::kNodeLimiterBudgetDays;

FleetLimiters summarizeFleetLimiters(std::vector<std::optional<model::LimiterVerdict>> nodes);

// The verdict that stands for the run's wait for input in its goodput: the slowest input's node,
// else the node whose measured wait was longest (the nodes of a synchronous run wait for the one
// that waits). None where no node was judged.
const model::LimiterVerdict* standingVerdictOf(const FleetLimiters& limiters);

}  // namespace stallwatch::correlator
