// The run of a launcher a job belongs to, across nodes: what every node's agent calls the same
// run (Slurm's job, torchrun's run id, a rendezvous address), from the job's key and the
// environment labels the jobs collector kept (SLURM_JOB_ID=..,RANK=..).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace stallwatch::model {

// slurm:ID[.STEP], torchelastic:ID or dist:ADDR:PORT: the job's key where it is a run's, else
// the run its labels name (a job an agent followed by its cgroup is keyed by the cgroup); ""
// for a job of one node only.
std::string runKeyOf(const std::string& job_key, const std::string& labels);
// The non-negative whole number label NAME holds (RANK, WORLD_SIZE); none if absent or not one.
std::optional<int32_t> labelNumber(const std::string& labels, const std::string& name);

}  // namespace stallwatch::model
