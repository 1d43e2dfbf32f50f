// The per-I/O evidence on a device a job reads, where the eBPF collector ran: the tail of the
// job's own reads against its own before, everyone else's beside it, and how much of the
// device's reading was others'. Internal to the correlator.
#pragma once

#include <optional>
#include <vector>

#include "correlator/evidence.h"
#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

struct ReadTail {
  // The job's reads' 99th percentile over the incident against its baseline (supports: it
  // crossed latency_ratio over the baseline floored at tail_floor_ms); none without figures.
  std::optional<evidence::Check> job;
  // In the order said: the job's p99, others' p99, others' share of the device's reads.
  std::vector<EvidenceItem> items;
};

// D's read tail over FIRST..LAST against BASE (the healthy intervals before).
ReadTail readTail(const DeviceSeries& d, const DetectorConfig& cfg, const std::vector<size_t>& base,
                  size_t first, size_t last);

}  // namespace stallwatch::correlator
