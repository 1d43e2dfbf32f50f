// Pushes the agent's metrics to an OTLP/HTTP receiver (an OpenTelemetry Collector, Prometheus 3's
// /api/v1/otlp) every interval, from a thread of its own: the latest snapshot the live pipeline
// published, encoded by metrics_otlp.h. A failed push is said once, then every tenth, and the
// next interval's carries the same cumulative series (nothing is queued: a receiver that was
// down misses points, not counts). Never waits on the sampling thread's behalf.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/metrics.h"
#include "agent/metrics_otlp.h"
#include "collectors/self_process.h"

namespace stallwatch::agent {

struct OtlpConfig {
  // The receiver's metrics URL: ".../v1/metrics" as given; a base URL (http://collector:4318)
  // gets "/v1/metrics" added, as OTEL_EXPORTER_OTLP_ENDPOINT is read.
  std::string endpoint;
  std::chrono::milliseconds interval = std::chrono::seconds(15);
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  std::vector<std::string> headers;  // "Name: value" (an API key, a tenant)
};

// ENDPOINT as pushed to: the metrics path added to a base URL.
std::string otlpMetricsUrl(const std::string& endpoint);

struct OtlpStats {
  uint64_t exported = 0, failed = 0;
};

class OtlpExporter {
 public:
  OtlpExporter(OtlpConfig config, const MetricsBoard& board, OtlpResource resource);
  ~OtlpExporter();  // one last push of the latest snapshot, within the timeout
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;
  OtlpStats stats() const;

 private:
  void run();
  void push();

  const OtlpConfig config_;
  const std::string url_;
  const MetricsBoard& board_;
  const OtlpResource resource_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  OtlpStats stats_;
  uint64_t failing_since_ = 0;          // failed pushes since the last one that went through
  collectors::SelfProcessReader self_;  // push()'s, on the exporting thread alone
  std::thread thread_;
};

}  // namespace stallwatch::agent
