// What a recording holds, as the readers of one get it (storage/recording.h reads them): a job
// as the agent found it, an incident as it was stored, the per-I/O latency over a span, and a
// run's jobs across several nodes' recordings. Plain data, so that what says them (render/)
// needs nothing of storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/incident.h"
#include "model/io_latency_histogram.h"

namespace stallwatch::model {

// One device's and operation's I/Os over a span, from the eBPF collector's histograms: the
// job's and everyone else's (the split), and all of them together.
struct IoLatencySummary : IoLatencySplit {
  std::string device;
  std::string op;
  IoLatencySlots all{};
  uint64_t all_count = 0;
};

// A job as the agent found it: its key (what groups its processes), label, command, GPUs, span.
struct JobRecord {
  int64_t job_id = 0;
  std::string key;
  std::string label;
  std::string labels;  // SLURM_JOB_ID=..,RANK=.. as recorded
  std::string cmdline;
  int64_t root_pid = 0;
  std::vector<std::string> gpu_uuids;
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  std::string cgroup_limits;  // schema 8; "" when none was set
};

// An incident as stored: live (as paged) or by the post-mortem (`incidents --recompute`).
struct StoredIncident {
  int64_t incident_id = 0;
  int64_t job_id = 0;
  std::string job_label;
  Incident incident;
  std::string source;  // live, recompute
  int64_t detected_ms = 0;
};

// A job of a run across nodes, in the recording it came from.
struct NodeJobRecord {
  size_t recording = 0;  // index in the recordings given
  JobRecord job;
};

struct RunAcrossNodes {
  std::string key;                    // slurm:ID, torchelastic:ID or dist:ADDR:PORT
  std::vector<NodeJobRecord> jobs;    // one per recording, in recording order
  int64_t from_ms = 0, to_ms = 0;     // the jobs' span together
  std::optional<int32_t> world_size;  // WORLD_SIZE, as the jobs' environments gave it
  size_t skipped_restarts = 0;  // further jobs of the run in a recording (the longest is kept)
};

}  // namespace stallwatch::model
