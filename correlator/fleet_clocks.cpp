#include "correlator/fleet_clocks.h"

#include <algorithm>
#include <cmath>

namespace stallwatch::correlator::fleet {
namespace {

constexpr size_t kMinClockOverlap = 30;  // intervals both nodes have, to compare clocks on
constexpr double kMinClockMatch = 0.6;   // correlation below this: the clocks cannot be told

// The clocks are checked on each node's first this many samples (4 h at 1 s, 60 h at a 15 s
// scrape): enough rhythm to line them up, in a third of a MiB a node however long the run.
constexpr size_t kClockSamples = 14'400;

int64_t medianOf(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

int64_t positiveMod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

// A node's progress on a dense grid of GRID_MS from T0_MS by its own clock.
std::vector<float> denseProgress(const ClockTrack& t, ClockSignal signal, int64_t t0_ms,
                                 int64_t grid_ms, size_t slots) {
  std::vector<float> out(slots, NodeColumns::kNone);
  const auto& values = t.of(signal);
  for (size_t i = 0; i < t.ts_ms.size(); ++i) {
    const int64_t k = (t.ts_ms[i] - t0_ms) / grid_ms;
    if (k >= 0 && static_cast<size_t>(k) < slots) out[static_cast<size_t>(k)] = values[i];
  }
  return out;
}

// The lag (in slots) at which B matches A best, and the correlation there: B[k + lag] ~ A[k].
std::pair<int64_t, double> bestLag(const std::vector<float>& a, const std::vector<float>& b,
                                   int64_t max_lag) {
  std::pair<int64_t, double> best{0, -2.0};
  const auto n = static_cast<int64_t>(a.size());
  for (int64_t lag = -max_lag; lag <= max_lag; ++lag) {
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    size_t count = 0;
    for (int64_t k = std::max<int64_t>(0, -lag); k < n && k + lag < n; ++k) {
      const double x = a[static_cast<size_t>(k)], y = b[static_cast<size_t>(k + lag)];
      if (std::isnan(x) || std::isnan(y)) continue;
      sx += x;
      sy += y;
      sxx += x * x;
      syy += y * y;
      sxy += x * y;
      ++count;
    }
    if (count < kMinClockOverlap) continue;
    const double c = static_cast<double>(count);
    const double vx = sxx - sx * sx / c, vy = syy - sy * sy / c;
    if (vx <= 1e-9 * c || vy <= 1e-9 * c) continue;  // flat: nothing to line up
    const double r = (sxy - sx * sy / c) / std::sqrt(vx * vy);
    if (r > best.second + 1e-9 ||
        (std::abs(r - best.second) <= 1e-9 && std::llabs(lag) < std::llabs(best.first)))
      best = {lag, r};
  }
  return best;
}

}  // namespace

const char* nameOf(ClockSignal s) {
  switch (s) {
    case ClockSignal::kSteps:
      return "steps";
    case ClockSignal::kGpuWork:
      return "gpu_work";
    case ClockSignal::kGpuUtil:
      return "gpu_util";
  }
  return "";
}

size_t ClockTrack::bytes() const {
  return ts_ms.capacity() * sizeof(int64_t) + interval_ms.capacity() * sizeof(int32_t) +
         (steps_rate.capacity() + gpu_work.capacity() + gpu_util.capacity()) * sizeof(float);
}

const std::vector<float>& ClockTrack::of(ClockSignal signal) const {
  switch (signal) {
    case ClockSignal::kSteps:
      return steps_rate;
    case ClockSignal::kGpuWork:
      return gpu_work;
    case ClockSignal::kGpuUtil:
      break;
  }
  return gpu_util;
}

ClockTrack readProgress(size_t node, const NodeReader& read) {
  ClockTrack t;
  read(node, model::NodeSampleFields::kProgress, [&](const model::NodeSample& x) {
    if (t.count && x.ts_ms <= t.last_ms) return;  // time order, once each
    if (!t.count++) t.first_ms = x.ts_ms;
    t.last_ms = x.ts_ms;
    t.steps = t.steps || x.steps.has_value();
    t.work = t.work || x.gpu_work_percent.has_value();
    t.util = t.util || x.gpu_util_percent.has_value();
    if (t.ts_ms.size() >= kClockSamples) return;
    t.ts_ms.push_back(x.ts_ms);
    t.interval_ms.push_back(static_cast<int32_t>(std::llround(x.interval_s * 1000.0)));
    const bool rate = x.steps && x.interval_s > 0;
    t.steps_rate.push_back(rate ? static_cast<float>(*x.steps / x.interval_s) : NodeColumns::kNone);
    t.gpu_work.push_back(NodeColumns::compact(x.gpu_work_percent));
    t.gpu_util.push_back(NodeColumns::compact(x.gpu_util_percent));
  });
  for (auto* v : {&t.steps_rate, &t.gpu_work, &t.gpu_util}) v->shrink_to_fit();
  t.ts_ms.shrink_to_fit();
  t.interval_ms.shrink_to_fit();
  return t;
}

// Steps where every node reports them (they move in lockstep across a synchronous job); else
// GPU work, which a waiting collective leaves at 0 on every node alike; else utilisation.
ClockSignal chooseClockSignal(const std::vector<ClockTrack>& tracks) {
  auto all = [&](bool ClockTrack::*has) {
    return std::all_of(tracks.begin(), tracks.end(), [&](const ClockTrack& t) { return t.*has; });
  };
  if (all(&ClockTrack::steps)) return ClockSignal::kSteps;
  if (all(&ClockTrack::work)) return ClockSignal::kGpuWork;
  return ClockSignal::kGpuUtil;
}

std::vector<ClockCheck> checkClocks(const std::vector<ClockTrack>& tracks,
                                    const std::vector<FleetNode>& nodes, ClockSignal signal,
                                    int64_t grid_ms) {
  std::vector<ClockCheck> checks(tracks.size());
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (size_t i = 0; i < tracks.size(); ++i) {
    checks[i].node = nodes[i].node;
    t0 = std::min(t0, tracks[i].ts_ms.front());
    t1 = std::max(t1, tracks[i].ts_ms.back());
  }
  if (tracks.empty()) return checks;
  const auto slots = static_cast<size_t>((t1 - t0) / grid_ms + 1);
  const std::vector<float> reference = denseProgress(tracks[0], signal, t0, grid_ms, slots);
  checks[0].checked = true;
  checks[0].match = 1.0;
  for (size_t i = 1; i < tracks.size(); ++i) {
    const std::vector<float> other = denseProgress(tracks[i], signal, t0, grid_ms, slots);
    const auto [lag, r] = bestLag(reference, other, kMaxClockLagMs / grid_ms);
    if (r < kMinClockMatch) continue;
    checks[i].checked = true;
    checks[i].match = r;
    checks[i].offset_ms = lag * grid_ms;
    checks[i].corrected = std::llabs(lag) > 1;  // within one interval: the tick phases differ
  }
  return checks;
}

int64_t medianInterval(const ClockTrack& first) {
  return std::max<int64_t>(1, medianOf({first.interval_ms.begin(), first.interval_ms.end()}));
}

GridPlacement placeOnGrid(const std::vector<ClockTrack>& tracks,
                          const std::vector<ClockCheck>& clocks, int64_t interval_ms) {
  // By the phase of each node's own ticks too, so that jitter of less than half an interval
  // never moves a sample into its neighbour's slot.
  GridPlacement p;
  p.shift_ms.resize(tracks.size());
  p.t0 = INT64_MAX;
  p.t1 = INT64_MIN;
  for (size_t n = 0; n < tracks.size(); ++n) {
    const ClockTrack& t = tracks[n];
    const int64_t offset = clocks[n].appliedOffsetMs();
    std::vector<int64_t> phases;
    for (size_t i = 0; i < t.ts_ms.size() && i < 1000; ++i)
      phases.push_back(positiveMod(t.ts_ms[i] - offset, interval_ms));
    p.shift_ms[n] = offset + medianOf(std::move(phases));
    p.t0 = std::min(p.t0, t.first_ms - p.shift_ms[n]);
    p.t1 = std::max(p.t1, t.last_ms - p.shift_ms[n]);
  }
  if (!tracks.empty()) p.shown_ms = p.shift_ms[0] - clocks[0].appliedOffsetMs();
  return p;
}

}  // namespace stallwatch::correlator::fleet
