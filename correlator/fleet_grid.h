// Pass two of the report across nodes (correlator/fleet): each node's samples merged onto the
// run's grid as they are read, into its float32 columns and the job's per-slot figures; the
// job's series built from those, and the nodes' figures made ranks of a window of it around a
// stall. Internal to the fleet correlator.
#pragma once

#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "correlator/fleet.h"

namespace stallwatch::correlator::fleet {

// The job's figures per slot of the grid, summed over the nodes as each is merged.
struct JobSlots {
  explicit JobSlots(size_t slots);
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  static constexpr size_t kBytesPerSlot = sizeof(uint32_t) + 11 * sizeof(double);
  std::vector<uint32_t> present;  // nodes with a sample in the slot
  std::vector<double> util_sum, util_gpus, work_sum, work_gpus;
  std::vector<double> wait_max, read, write, workers, d_state, io_max, cpu_max;
};

// What a slot of the grid takes over NODES nodes: each node's columns, the job's sums, its
// series and the analysis' (about 200 bytes besides the columns).
size_t bytesPerSlot(size_t nodes);

// How many of the recordings' intervals make a slot of the grid so that FINE_SLOTS of them fit
// in MAX_BYTES (0: no bound) at PER_SLOT bytes each.
size_t coarsening(size_t fine_slots, size_t per_slot, size_t max_bytes);

// Node NODE's samples onto the grid (slots of FACTOR intervals of INTERVAL_MS from T0, its
// timestamps less SHIFT_MS): its COLUMNS, and its share of the JOB's slots, added under LOCK a
// batch of slots at a time. SAMPLES counts those placed.
void mergeNode(size_t node, const NodeReader& read, int64_t shift_ms, int64_t t0,
               int64_t interval_ms, size_t factor, double gpus, NodeColumns& columns, JobSlots& job,
               std::mutex& lock, size_t& samples);

// The run's series on the grid, with one rank per node standing for it (its series empty: the
// node's are in F.columns), from the job's slots; F.columns moved from slots to intervals.
void buildSeries(FleetAnalysis& f, const JobSlots& job, const std::vector<FleetNode>& nodes,
                 int64_t t0, int64_t shown_ms);

// The run's series over intervals FROM..TO with each node's figures as a rank: what a stall
// there is attributed on, the straggler found by.
JobSeries windowOf(const FleetAnalysis& f, size_t from, size_t to);

}  // namespace stallwatch::correlator::fleet
