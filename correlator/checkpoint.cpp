// The job's own writes over an incident: a checkpoint's burst, where it went, and what slowed it.
#include "correlator/checkpoint.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "correlator/wait_channel.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;
using evidence::Check;
using evidence::compare;
using evidence::kAtLimitShare;
using Metric = model::EvidenceMetric;
using Scope = model::EvidenceScope;

// A checkpoint's peak: at least this many bytes per second in one interval, and a burst that
// writes at least this many bytes counts even without a writeback wait seen.
constexpr double kCheckpointPeakFloor = 100e6;
constexpr double kCheckpointBytes = 1e9;

// Two devices wrote alike over a checkpoint when the lesser wrote at least this share of the
// greater (a loop device and the disk under it: the same bytes, flushed in bursts).
constexpr double kAlikeShare = 0.75;

// Devices stacked on others: their writes reach a disk below.
bool stacked(const std::string& name) {
  for (const char* prefix : {"loop", "dm-", "md", "nbd", "rbd", "drbd", "/"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::pair<const DeviceSeries*, const DeviceSeries*> checkpointTarget(
    const JobSeries& s, const std::vector<size_t>& around) {
  const DeviceSeries* target = nullptr;
  const DeviceSeries* below = nullptr;
  auto bytesWritten = [&](const DeviceSeries& d) {
    double sum = 0;
    for (size_t i : around) sum += at(d.write_bytes_per_s, i).value_or(0.0);
    return sum;
  };
  double most = 0;
  for (const DeviceSeries& d : s.devices) most = std::max(most, bytesWritten(d));
  if (most > 0) {
    for (const DeviceSeries& d : s.devices) {
      if (bytesWritten(d) < kAlikeShare * most) continue;
      if (!target || (stacked(d.name) && !stacked(target->name))) {
        if (target && !stacked(target->name)) below = target;
        target = &d;
      } else if (!stacked(d.name) && !below) {
        below = &d;
      }
    }
    return {target, below == target ? nullptr : below};
  }
  double slowest = -1;
  for (const DeviceSeries& d : s.devices) {
    if (!d.job_reads || !d.direct()) continue;
    const auto w = evidence::medianOver(around, [&](size_t i) { return at(d.w_await_ms, i); });
    if (w && *w > slowest) {
      slowest = *w;
      target = &d;
    }
  }
  return {target, nullptr};
}

void nameCheckpoint(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    const std::vector<size_t>& around, const std::string& io_limits,
                    const std::optional<Check>& target_latency, Incident& inc) {
  const auto chosen = checkpointTarget(s, around);
  const DeviceSeries* target = chosen.first;
  const DeviceSeries* below = chosen.second;
  if (target) {
    inc.device = target->name;
    if (below) inc.physical_device = below->name;
    Check device_writes = compare(
        {Metric::kWriteBytesPerS, Scope::kDevice, target->name, ""}, base, inc.first, inc.last,
        [&](size_t i) { return at(target->write_bytes_per_s, i); }, true, cfg.write_ratio,
        cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
    // Its device slowed it: the device's latency against its own before, said either way.
    if (target_latency) {
      const EvidenceItem& latency = target_latency->item;
      EvidenceItem slowed = model::evidenceItem(
          {Metric::kCheckpointSlowedByAwaitMs, Scope::kDevice, target->name, ""}, latency.baseline,
          latency.during, latency.supports);
      slowed.signal = "checkpoint_slowed_by await_ms " + target->name;  // as reports have said it
      inc.evidence.push_back(std::move(slowed));
    }
    // A write limit on the job's cgroup for that device held the checkpoint back: named.
    const size_t wbps = io_limits.find("wbps=");
    if (io_limits.find("(" + target->name + ")") != std::string::npos &&
        wbps != std::string::npos) {
      model::addNote(device_writes.item, "under " + io_limits);
      // Held by the limit: a throttled write waits before it reaches the device, so the
      // device's own latency does not show it; its writes sitting at the limit do.
      const double limit_bytes = std::strtod(io_limits.c_str() + wbps + 5, nullptr) * (1 << 20);
      if (limit_bytes > 0) {
        EvidenceItem held = model::evidenceItem(
            {Metric::kCheckpointHeldByWriteLimit, Scope::kDevice, target->name, io_limits},
            limit_bytes, device_writes.item.during,
            device_writes.item.during >= kAtLimitShare * limit_bytes);
        held.signal = "checkpoint_held_by " + io_limits;  // as reports have said it
        inc.evidence.push_back(std::move(held));
      }
    }
    inc.evidence.push_back(device_writes.item);
  }
}

WriteBurst judgeWrites(const JobSeries& s, const DetectorConfig& cfg,
                       const std::vector<size_t>& base, Incident& inc) {
  auto add = [&](const Check& c) { inc.evidence.push_back(c.item); };
  WriteBurst w;
  Check& writes = w.writes;
  writes = compare(
      {Metric::kJobWriteBytesPerS, Scope::kJob, "", ""}, base, inc.first, inc.last,
      [&](size_t i) { return at(s.write_bytes_per_s, i); }, true, cfg.write_ratio,
      cfg.write_floor_bytes_per_s, cfg.write_floor_bytes_per_s);
  add(writes);
  // The incident's intervals, and the same from the one before it: a checkpoint's burst often
  // lands as the GPUs go idle.
  for (size_t i = inc.first > 0 ? inc.first - 1 : 0; i <= inc.last; ++i) {
    w.around.push_back(i);
    if (i >= inc.first) w.during.push_back(i);
  }
  Check burst = writes;
  burst.item = model::evidenceItem({Metric::kJobWriteBytesPerS, Scope::kJob, "", "peak"},
                                   burst.item.baseline, burst.item.during, burst.item.supports);
  burst.item.during = 0;
  double written = 0;
  for (size_t i : w.around) {
    const double bytes = at(s.write_bytes_per_s, i).value_or(0.0);
    burst.item.during = std::max(burst.item.during, bytes);
    written += bytes * (i < s.interval_s.size() ? s.interval_s[i] : 1.0);
  }
  burst.item.supports =
      burst.item.during >=
      std::max(cfg.write_ratio * std::max(writes.item.baseline, cfg.write_floor_bytes_per_s),
               kCheckpointPeakFloor);
  // Threads waiting for writeback or a journal commit: a sync after the write.
  size_t flushing = 0, blocked = 0;
  for (size_t i = inc.first; i <= inc.last && i < s.d_state_wchan.size(); ++i) {
    if (at(s.d_state_threads, i).value_or(0) < 1) continue;
    ++blocked;
    const std::string subsystem = waitSubsystem(s.d_state_wchan[i]);
    if (subsystem == "writeback" || subsystem == "journal") ++flushing;
  }
  const bool waits_for_writeback = flushing > 0 && 2 * flushing >= blocked;
  w.checkpoint = writes.item.supports ||
                 (burst.item.supports && (waits_for_writeback || written >= kCheckpointBytes));
  if (burst.item.supports || waits_for_writeback) {
    if (waits_for_writeback) model::addNote(burst.item, "(then waiting for writeback)");
    add(burst);
  }
  return w;
}

}  // namespace stallwatch::correlator
