#include "correlator/read_tail.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;
using evidence::compare;
using Metric = model::EvidenceMetric;
using Scope = model::EvidenceScope;

// Others' share of a device's reads supports a neighbour's part in the stall when it reaches
// this share and rose by this much over its baseline.
constexpr double kNeighbourShare = 0.5;
constexpr double kNeighbourShareRise = 0.25;

bool anyKnown(const Series& x, const std::vector<size_t>& base, size_t first, size_t last) {
  for (size_t i : base)
    if (at(x, i)) return true;
  for (size_t i = first; i <= last; ++i)
    if (at(x, i)) return true;
  return false;
}

}  // namespace

ReadTail readTail(const DeviceSeries& d, const DetectorConfig& cfg, const std::vector<size_t>& base,
                  size_t first, size_t last) {
  ReadTail t;
  if (!anyKnown(d.job_read_p99_ms, base, first, last) &&
      !anyKnown(d.others_read_p99_ms, base, first, last))
    return t;
  // A batch waits for its slowest read: the job's own tail, against its own before.
  t.job = compare(
      {Metric::kJobReadP99Ms, Scope::kDevice, d.name, ""}, base, first, last,
      [&](size_t i) { return at(d.job_read_p99_ms, i); }, true, cfg.latency_ratio,
      cfg.tail_floor_ms, cfg.tail_floor_ms);
  t.items.push_back(t.job->item);
  // Everyone else's on the same device: slow alike (the device), or fast (the job's alone).
  t.items.push_back(compare(
                        {Metric::kOthersReadP99Ms, Scope::kDevice, d.name, ""}, base, first, last,
                        [&](size_t i) { return at(d.others_read_p99_ms, i); }, true,
                        cfg.latency_ratio, cfg.tail_floor_ms, cfg.tail_floor_ms)
                        .item);
  // How much of the device's reading was someone else's: a neighbour's share that rose.
  auto share = [&](size_t i) -> std::optional<double> {
    const auto own = at(d.job_reads_per_s, i), others = at(d.others_reads_per_s, i);
    if (!own || !others || *own + *others <= 0) return std::nullopt;
    return *others / (*own + *others);
  };
  evidence::Check neighbours =
      compare({Metric::kOthersShareOfReads, Scope::kDevice, d.name, ""}, base, first, last, share,
              false, kNeighbourShareRise, 0, kNeighbourShare);
  if (neighbours.item.during > 0 || neighbours.item.baseline > 0)
    t.items.push_back(neighbours.item);
  return t;
}

}  // namespace stallwatch::correlator
