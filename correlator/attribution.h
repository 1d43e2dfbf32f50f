// What the detector and the attribution share. Internal to the correlator.
#pragma once

#include <string_view>
#include <vector>

#include "correlator/evidence.h"
#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

// The evidence that the job read at its cgroup's io.max limit: io-throttled, with the limit named.
inline constexpr model::EvidenceMetric kAtIoLimitMetric =
    model::EvidenceMetric::kJobCgroupReadBytesPerS;

// The share of a limit at which a job is held by it (correlator/evidence.h).
using evidence::kAtLimitShare;
// Fewer healthy intervals than this before an incident leave nothing to call it worse than.
inline constexpr size_t kMinBaselineForAttribution = 5;

// The healthy intervals an incident starting at FIRST is compared with: the unstalled ones
// among the baseline window before it.
std::vector<size_t> baselineBefore(size_t first, const std::vector<bool>& stalled,
                                   const DetectorConfig& config);

}  // namespace stallwatch::correlator
