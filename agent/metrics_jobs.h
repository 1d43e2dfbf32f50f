// The followed jobs on /metrics: each job's figures over the last interval (labelled by its
// key), its verdict over its last minute, and for a job that is this node's share of a run
// across nodes, the run and node it belongs to and each rank's figures. What the fleet report
// reads from Prometheus (docs/PROMETHEUS.md lists it). Internal to agent/'s metrics files.
#pragma once

#include "agent/metric_sink.h"
#include "agent/metrics.h"

namespace stallwatch::agent {

void renderJobs(const MetricsSnapshot& s, MetricSink& w);
void renderRanks(const MetricsSnapshot& s, MetricSink& w);

}  // namespace stallwatch::agent
