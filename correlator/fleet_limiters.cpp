#include "correlator/fleet_limiters.h"

namespace stallwatch::correlator {
namespace {

bool inputBound(model::Limiter l) {
  return l == model::Limiter::kInputCpu || l == model::Limiter::kInputWorkers ||
         l == model::Limiter::kInputStorage || l == model::Limiter::kIoThrottled;
}

}  // namespace

FleetLimiters summarizeFleetLimiters(std::vector<std::optional<model::LimiterVerdict>> nodes) {
  FleetLimiters out;
  out.nodes = std::move(nodes);
  std::array<double, model::kLimiterCount> judged_gpu_seconds{};
  double most_wait = 0;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    const auto& v = out.nodes[i];
    if (!v) continue;
    const auto k = static_cast<size_t>(v->limiter);
    out.wait_gpu_hours[k] += v->input_wait_gpu_seconds / 3600.0;
    judged_gpu_seconds[k] += v->seconds * v->gpus;
    // A node whose wait is unknown (no figures) is not "the slowest" by a zero.
    // Among the nodes its input held back: a GPU-bound node's small wait names no one.
    if (inputBound(v->limiter) && v->input_wait_share > most_wait) {
      most_wait = v->input_wait_share;
      out.slowest_input_node = i;
    }
  }
  double most = 0;
  for (size_t k = 0; k < judged_gpu_seconds.size(); ++k) {
    if (judged_gpu_seconds[k] > most) {
      most = judged_gpu_seconds[k];
      out.run_limiter = static_cast<model::Limiter>(k);
    }
  }
  return out;
}

const model::LimiterVerdict* standingVerdictOf(const FleetLimiters& limiters) {
  if (limiters.slowest_input_node && limiters.nodes[*limiters.slowest_input_node])
    return &*limiters.nodes[*limiters.slowest_input_node];
  const model::LimiterVerdict* longest = nullptr;
  for (const auto& v : limiters.nodes) {
    if (!v || v->wait_source == model::WaitSource::kNone) continue;
    if (!longest || v->input_wait_share > longest->input_wait_share) longest = &*v;
  }
  return longest;
}

}  // namespace stallwatch::correlator
