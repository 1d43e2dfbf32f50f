#include "agent/metrics_otlp.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "agent/metric_sink.h"

namespace stallwatch::agent {
namespace {

using json = nlohmann::json;

// OTLP's JSON encoding writes 64-bit integers as decimal strings (protobuf's JSON mapping).
json u64(uint64_t v) { return std::to_string(v); }

json stringAttribute(std::string_view key, std::string_view value) {
  return {{"key", key}, {"value", {{"stringValue", value}}}};
}

// The unit of a family, from its name's suffix (UCUM, as OTLP asks).
const char* unitOf(std::string_view name) {
  if (name.ends_with("_seconds")) return "s";
  if (name.ends_with("_bytes")) return "By";
  if (name.ends_with("_ratio")) return "1";
  return "";
}

class OtlpWriter final : public MetricSink {
 public:
  OtlpWriter(int64_t start_ns, int64_t now_ns)
      : start_(std::to_string(start_ns)), now_(std::to_string(now_ns)) {}

  void family(const char* name, const char* type, const char* help) override {
    flush();
    std::string_view n = name;
    counter_ = std::string_view(type) == "counter";
    histogram_ = std::string_view(type) == "histogram";
    // Prometheus' counter suffix is the exposition's, not the metric's.
    if (counter_ && n.ends_with("_total")) n.remove_suffix(6);
    metric_ = {{"name", std::string(n)}, {"description", help}, {"unit", unitOf(n)}};
    points_ = json::array();
  }

  void sample(std::span<const Label> labels, double value) override {
    if (!std::isfinite(value) || histogram_) return;
    json point = {{"attributes", attributes(labels)}, {"timeUnixNano", now_}, {"asDouble", value}};
    if (counter_) point["startTimeUnixNano"] = start_;
    points_.push_back(std::move(point));
  }

  void histogram(std::span<const Label> labels, const double* bounds, const uint64_t* per_bound,
                 size_t n_bounds, uint64_t count, double sum) override {
    json counts = json::array(), explicit_bounds = json::array();
    uint64_t counted = 0;
    for (size_t i = 0; i < n_bounds; ++i) {
      explicit_bounds.push_back(bounds[i]);
      counts.push_back(u64(per_bound[i]));
      counted += per_bound[i];
    }
    counts.push_back(u64(count >= counted ? count - counted : 0));  // above the last bound
    json point = {{"attributes", attributes(labels)},
                  {"startTimeUnixNano", start_},
                  {"timeUnixNano", now_},
                  {"count", u64(count)},
                  {"bucketCounts", std::move(counts)},
                  {"explicitBounds", std::move(explicit_bounds)}};
    if (std::isfinite(sum)) point["sum"] = sum;
    points_.push_back(std::move(point));
  }

  json take() {
    flush();
    return std::move(metrics_);
  }

 private:
  json attributes(std::span<const Label> labels) const {
    json out = json::array();
    forEachLabel(labels, [&](std::string_view name, std::string_view value) {
      out.push_back(stringAttribute(name, value));
    });
    return out;
  }

  // The family begun last, with its points; none without a point.
  void flush() {
    if (metric_.is_null() || points_.empty()) return;
    if (histogram_) {
      metric_["histogram"] = {{"aggregationTemporality", 2}, {"dataPoints", std::move(points_)}};
    } else if (counter_) {
      metric_["sum"] = {{"aggregationTemporality", 2},  // CUMULATIVE
                        {"isMonotonic", true},
                        {"dataPoints", std::move(points_)}};
    } else {
      metric_["gauge"] = {{"dataPoints", std::move(points_)}};
    }
    metrics_.push_back(std::move(metric_));
    metric_ = nullptr;
    points_ = json::array();
  }

  const std::string start_, now_;
  json metrics_ = json::array();
  json metric_;
  json points_ = json::array();
  bool counter_ = false, histogram_ = false;
};

}  // namespace

std::string renderOtlp(const MetricsSnapshot& snapshot,
                       const std::optional<collectors::SelfProcess>& process,
                       const OtlpResource& resource_of, int64_t now_ns) {
  OtlpWriter w(resource_of.start_ns, now_ns);
  writeMetrics(snapshot, process, w);
  json resource = json::object();
  resource["attributes"] = json::array();
  for (const auto& [key, value] : {std::pair{"service.name", std::string("stallwatch")},
                                   std::pair{"service.version", resource_of.version},
                                   std::pair{"service.instance.id", resource_of.node},
                                   std::pair{"host.name", resource_of.node}})
    resource["attributes"].push_back(stringAttribute(key, value));
  json scope = json::object();
  scope["scope"] = {{"name", "stallwatch"}, {"version", resource_of.version}};
  scope["metrics"] = w.take();
  json resource_metrics = json::object();
  resource_metrics["resource"] = std::move(resource);
  resource_metrics["scopeMetrics"] = json::array();
  resource_metrics["scopeMetrics"].push_back(std::move(scope));
  json request = json::object();
  request["resourceMetrics"] = json::array();
  request["resourceMetrics"].push_back(std::move(resource_metrics));
  // Label values are made valid UTF-8 where they enter (common/text.h); any byte that is not
  // is replaced rather than failing the export.
  return request.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace stallwatch::agent
