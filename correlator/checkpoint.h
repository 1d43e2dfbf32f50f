// A job's own write burst over an incident (a checkpoint): judged against its baseline, the
// device it went to, and what slowed it. Internal to the correlator (attribution).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "correlator/evidence.h"
#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

// The job's own write burst (a checkpoint). A checkpoint writes its bytes in an interval or
// two at full speed, then waits for writeback (a sync) with little written: its median misses
// it, its peak does not. Its evidence added to INC.
struct WriteBurst {
  evidence::Check writes;
  bool checkpoint = false;
  std::vector<size_t> during, around;  // the incident's intervals; and the one before it too
};

WriteBurst judgeWrites(const JobSeries& s, const DetectorConfig& cfg,
                       const std::vector<size_t>& base, Incident& inc);

// The device a checkpoint went to: the one that wrote the most over the burst and the stall
// (a checkpoint may go to a disk the job never reads). A stacked device (a loop, dm or md
// device, a mount) carries its writes down to the disk below, which then writes as much: where
// they wrote alike, the stacked one is named, the other as its physical disk. Recordings
// without device write figures: the job's device whose writes took longest.
std::pair<const DeviceSeries*, const DeviceSeries*> checkpointTarget(
    const JobSeries& s, const std::vector<size_t>& around);

// A checkpoint's device (the one the job wrote in AROUND), named on INC with what slowed it: the
// device's latency against its own before (TARGET_LATENCY), a write limit in IO_LIMITS (the
// io.max part of the job's cgroup limits).
void nameCheckpoint(const JobSeries& s, const DetectorConfig& cfg, const std::vector<size_t>& base,
                    const std::vector<size_t>& around, const std::string& io_limits,
                    const std::optional<evidence::Check>& target_latency, Incident& inc);

}  // namespace stallwatch::correlator
