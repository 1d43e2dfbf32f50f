// Jobs of several ranks: which rank held a synchronous job back, and the job as that rank saw
// it. Internal to the correlator (stall_detector's attribution).
#pragma once

#include <optional>
#include <vector>

#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

// Which rank held a synchronous job back during INC, with its per-rank evidence added to INC.
// Returns the straggler's index in s.ranks; none when several ranks (or none) starved alike,
// which INC then says (ranks_starved).
std::optional<size_t> findStraggler(const JobSeries& s, const DetectorConfig& cfg,
                                    const std::vector<size_t>& base, Incident& inc);

// The job seen through rank R: its processes' writes, reads, D-state threads and workers,
// with the job's devices and the host's pressure, so that the usual attribution names what
// starved that rank.
JobSeries throughRank(const JobSeries& s, const RankSeries& r);

}  // namespace stallwatch::correlator
