// A job's slice of a recording, as a small self-contained recording of its own: what a Slurm
// epilog or a torchrun wrapper collects from every node of a run, for a post-mortem across
// nodes (`stallwatch report` reads it like any recording).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "storage/recording.h"

namespace stallwatch::storage {

struct ExportResult {
  int64_t from_ms = 0, to_ms = 0;       // the span exported
  std::map<std::string, int64_t> rows;  // per table
  std::string hostname;                 // of the recording's last run in the span
};

// Writes JOBS (records from SOURCE) over their span within RANGE to OUT, which must not exist:
// the jobs, their samples, ranks, devices, processes and incidents; every device's and the
// host's pressure samples in the span (the evidence of other disks); their GPUs' samples; the
// drives' health from the last reading before the span; the runs (host, version, interval)
// and agent events of the span. Written to OUT.partial and renamed when complete. Throws
// StoreError.
ExportResult exportJobs(const std::filesystem::path& source, const std::vector<JobRecord>& jobs,
                        const TimeRange& range, const std::filesystem::path& out);

}  // namespace stallwatch::storage
