// The agent's metrics as an OTLP/HTTP export (OpenTelemetry's protocol, its JSON encoding), for
// fleets that collect through an OpenTelemetry Collector rather than by scraping (Prometheus 3
// takes OTLP too). The same families as /metrics, written through MetricSink: gauges as
// gauges, counters as cumulative monotonic sums (named without Prometheus' "_total", as the
// Collector's Prometheus receiver names them), histograms as explicit-bucket histograms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "agent/metrics.h"
#include "collectors/self_process.h"

namespace stallwatch::agent {

// Who the metrics are of, and since when: the resource's attributes and the start of every
// cumulative series.
struct OtlpResource {
  std::string node;      // host.name and service.instance.id
  std::string version;   // service.version
  int64_t start_ns = 0;  // when the agent started (Unix time, ns): cumulative series' start
};

// One ExportMetricsServiceRequest in JSON: SNAPSHOT's families at NOW_NS. Values that JSON cannot
// hold (NaN, infinities) are left out.
std::string renderOtlp(const MetricsSnapshot& snapshot,
                       const std::optional<collectors::SelfProcess>& process,
                       const OtlpResource& resource, int64_t now_ns);

}  // namespace stallwatch::agent
