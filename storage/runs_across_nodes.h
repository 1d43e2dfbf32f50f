// Which jobs in several nodes' recordings are one run of a launcher: the same Slurm job,
// torchrun run id or rendezvous address (the job key the jobs collector gives them), at times
// that overlap. A rendezvous address is reused by the next run, a torchrun run id may be the
// default "none": the overlap keeps different runs apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/recording.h"

namespace stallwatch::storage {

// The records read back (model/recording.h).
using model::NodeJobRecord;
using model::RunAcrossNodes;

// The run JOB belongs to: its key where that is a run's, else the run its environment names
// (a job an agent followed by its cgroup); "" for a job of one node only.
std::string runKeyOf(const JobRecord& job);

// JOBS_PER_RECORDING[i]: recording i's jobs. Runs in order of their start; each holds the jobs
// of one key whose spans overlap (a job still running reaches to the end of time), at most one
// per recording.
std::vector<RunAcrossNodes> groupRuns(
    const std::vector<std::vector<JobRecord>>& jobs_per_recording);

}  // namespace stallwatch::storage
