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
// The most ranks a run is believed to have: WORLD_SIZE comes from a job's environment (what any
// process can set), and a report lists the ranks it lacks, so a larger one is not believed
// (issue 46: 999999999 made a report take 30 s and 4 GB). The largest runs are ~10^5 GPUs.
constexpr int32_t kMaxWorldSize = 1 << 20;
// WORLD_SIZE from LABELS, none where absent, not a number, zero or past kMaxWorldSize.
std::optional<int32_t> worldSizeOf(const std::string& labels);
// The same bound on a world size from elsewhere (a Prometheus label).
std::optional<int32_t> believableWorldSize(int64_t value);

}  // namespace stallwatch::model
