#include "model/node_sample.h"

#include <cmath>
#include <iterator>
#include <limits>

namespace stallwatch::model {
namespace {

constexpr std::optional<double> NodeSample::*kMembers[] = {
    &NodeSample::steps,
    &NodeSample::gpu_util_percent,
    &NodeSample::gpu_work_percent,
    &NodeSample::data_wait_s,
    &NodeSample::read_bytes_per_s,
    &NodeSample::write_bytes_per_s,
    &NodeSample::workers_cpu,
    &NodeSample::d_state_threads,
    &NodeSample::io_some,
    &NodeSample::cpu_some,
    &NodeSample::rank_gpu_util_percent,
    &NodeSample::rank_gpu_work_percent,
    &NodeSample::rank_data_wait_s,
};
static_assert(std::size(kMembers) == kNodeFigureCount, "a node figure without its member");

constexpr float kNone = std::numeric_limits<float>::quiet_NaN();

}  // namespace

std::optional<double> NodeSample::*memberOf(NodeFigure figure) {
  return kMembers[static_cast<size_t>(figure)];
}

void NodeSampleColumns::append(int64_t ts_ms, double interval_s) {
  ts_ms_.push_back(ts_ms);
  interval_s_.push_back(interval_s);
  for (auto& v : values_) {
    if (!v.empty()) v.push_back(kNone);
  }
}

std::optional<double> NodeSampleColumns::at(NodeFigure figure, size_t i) const {
  const std::vector<float>& v = values_[index(figure)];
  if (i >= v.size() || std::isnan(v[i])) return std::nullopt;
  return v[i];
}

void NodeSampleColumns::set(NodeFigure figure, size_t i, std::optional<double> value) {
  std::vector<float>& v = values_[index(figure)];
  if (i >= size()) return;
  if (v.empty()) {
    if (!value) return;
    v.assign(size(), kNone);
  }
  v[i] = value ? static_cast<float>(*value) : kNone;
}

NodeSample NodeSampleColumns::sample(size_t i) const {
  NodeSample x;
  x.ts_ms = ts_ms_[i];
  x.interval_s = interval_s_[i];
  for (size_t f = 0; f < kNodeFigureCount; ++f) x.*kMembers[f] = at(static_cast<NodeFigure>(f), i);
  return x;
}

size_t NodeSampleColumns::bytes() const {
  size_t out = ts_ms_.capacity() * sizeof(int64_t) + interval_s_.capacity() * sizeof(double);
  for (const auto& v : values_) out += v.capacity() * sizeof(float);
  return out;
}

}  // namespace stallwatch::model
