// The followed jobs on /metrics: each job's figures over the last interval (labelled by its
// key), its verdict over its last minute, and for a job that is this node's share of a run
// across nodes, the run and node it belongs to and each rank's figures. What the fleet report
// reads from Prometheus (docs/PROMETHEUS.md lists it). Internal to agent/'s metrics files.
#pragma once

#include "agent/metrics.h"
#include "agent/metrics_writer.h"

namespace stallwatch::agent {

void renderJobs(const MetricsSnapshot& s, metrics_text::Writer& w);
void renderRanks(const MetricsSnapshot& s, metrics_text::Writer& w);

}  // namespace stallwatch::agent
