// Every I/O's latency on /metrics (the eBPF collector's histograms): everyone's per device and
// operation, and each followed job's own in a family of its own, so that a sum over either
// counts each I/O once. Internal to agent/'s metrics files.
#pragma once

#include <vector>

#include "agent/metric_sink.h"
#include "agent/metrics.h"

namespace stallwatch::agent {

void renderIoLatency(const std::vector<IoLatencyMetric>& totals, MetricSink& w);

}  // namespace stallwatch::agent
