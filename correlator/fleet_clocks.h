// Pass one of the report across nodes (correlator/fleet): each node's progress read by its own
// clock, the nodes' clocks checked against the first node's from the data, and where each
// node's samples fall on the run's common grid. Internal to the fleet correlator.
#pragma once

#include <cstdint>
#include <vector>

#include "correlator/fleet.h"

namespace stallwatch::correlator::fleet {

// The progress a node's clock is checked by, per interval of its own series.
enum class ClockSignal { kSteps, kGpuWork, kGpuUtil };

const char* nameOf(ClockSignal s);

// A node's progress by its own clock, each signal the clocks may be checked by, over its first
// samples (a bounded number however long the run); its span and count over all.
struct ClockTrack {
  int64_t first_ms = 0, last_ms = 0;
  size_t count = 0;
  std::vector<int64_t> ts_ms;
  std::vector<int32_t> interval_ms;
  std::vector<float> steps_rate, gpu_work, gpu_util;
  bool steps = false, work = false, util = false;

  size_t bytes() const;
  const std::vector<float>& of(ClockSignal signal) const;
};

ClockTrack readProgress(size_t node, const NodeReader& read);

// Steps where every node reports them; else GPU work; else utilisation.
ClockSignal chooseClockSignal(const std::vector<ClockTrack>& tracks);

// Each node's clock against the first node's, compared by SIGNAL on a grid of GRID_MS.
std::vector<ClockCheck> checkClocks(const std::vector<ClockTrack>& tracks,
                                    const std::vector<FleetNode>& nodes, ClockSignal signal,
                                    int64_t grid_ms);

// The recordings' interval: the median of the first node's.
int64_t medianInterval(const ClockTrack& first);

// Where each node's samples fall on a grid of INTERVAL_MS: by its clock, corrected where it
// had to be, and by the phase of its own ticks.
struct GridPlacement {
  std::vector<int64_t> shift_ms;  // subtracted from each node's timestamps
  int64_t t0 = 0, t1 = 0;         // the first and last sample, shifted
  // Added back to the grid's times so that they read on the first node's clock.
  int64_t shown_ms = 0;
};

GridPlacement placeOnGrid(const std::vector<ClockTrack>& tracks,
                          const std::vector<ClockCheck>& clocks, int64_t interval_ms);

}  // namespace stallwatch::correlator::fleet
