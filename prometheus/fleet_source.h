// A run across nodes as the operators' Prometheus (or Thanos Query, or Mimir) holds it: which
// nodes ran it, and each node's series in the shape the fleet correlator judges, the same
// shape storage reads from a recording (model::JobSeries). The reductions across a node's
// ranks are left to the server (min, max by node), so that a report over a thousand nodes asks
// for one series a node, not one a rank. What it reads is listed in docs/PROMETHEUS.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/limiter.h"
#include "model/node_sample.h"
#include "model/series.h"
#include "prometheus/client.h"

namespace stallwatch::prometheus {

struct RunSelection {
  std::string run;                     // the run label: slurm:ID, torchelastic:ID, dist:ADDR:PORT
  int64_t since_ms = 0, until_ms = 0;  // where to look for it
  std::optional<int64_t> step_ms;      // the scrape interval; found from the samples when not given
  std::string matchers;                // more label matchers for every selector (cluster="a")
};

struct RunNode {
  std::string node;          // the node label its agent gave (--node, else its host name)
  std::string instance;      // the scrape target it came from
  std::string training_job;  // the job's key on that node
  std::vector<int32_t> ranks;
  uint32_t gpus = 0;
};

// Values a server sent that no agent exports (issue 46): refused, and counted for the report.
struct ServerValues {
  size_t refused = 0;      // not finite, or negative
  size_t disagreeing = 0;  // one slot of one node filled by two series with different values
};

struct FoundRun {
  std::string run;
  int64_t from_ms = 0, to_ms = 0;  // the span of its samples, on the step grid
  int64_t step_ms = 0;
  bool step_given = false;   // false: found from the samples' spacing
  int64_t data_step_ms = 0;  // the samples' own spacing (0: not found); a coarser step misses
                             // stalls shorter than it
  // What the series' times are shifted back by from Prometheus's steps: the agents' sampling
  // interval, from the rise of stallwatch_intervals_total (0 where they do not export it). A value
  // Prometheus holds at a step is the one the agent gave for its interval before the scrape: half a
  // scrape interval on average from that interval's end to the scrape, and half one more from the
  // scrape to the step, which the step's own span takes back; what stays is the agent's own
  // interval. Shifted, a stall starts and ends where a recording of the same run puts it
  // (docs/PROMETHEUS.md).
  int64_t shown_shift_ms = 0;
  std::optional<int32_t> world_size;
  std::vector<RunNode> nodes;  // sorted by lowest rank, then name
};

class FleetSource {
 public:
  // Finds the run RUN in the span: its nodes and their ranks, its span and the step. Throws
  // QueryError when the server cannot be asked.
  FleetSource(Client& client, RunSelection selection);

  const FoundRun& run() const { return run_; }
  // Each node's summary (what storage's Recording::Detail::kNodeSummary reads from a recording):
  // the job's figures on the node, and its slowest rank's, on the run's steps where its agent
  // ran the job; held compact, as a thousand nodes' are held at once.
  std::vector<model::NodeSampleColumns> summaries();
  // Node NODE's full series from FROM_MS to TO_MS: its job's figures, its ranks, its host's
  // pressure and devices (those the job reads marked), to explain a stall on.
  model::JobSeries window(size_t node, int64_t from_ms, int64_t to_ms);
  // Each node's standing verdict over the run, from what its agent said minute by minute
  // (stallwatch_job_limiter and its input wait and speed-up): the limiter it named most often,
  // the mean wait and speed-up. None for a node whose agent said none.
  std::vector<std::optional<model::LimiterVerdict>> limiters();
  // What was refused of the server's values so far.
  const ServerValues& values() const { return values_; }

 private:
  std::string selector(const std::string& metric, const std::string& more = "") const;
  // The label matcher of the run's nodes' jobs (training_job), as discovered.
  std::string jobsMatcher() const;
  // The run's span FIRST to LAST (ms), its step and its agents' sampling interval.
  void timeRun(int64_t first, int64_t last);

  Client& client_;
  RunSelection selection_;
  std::string run_matcher_;  // the run label matcher every selector of the run carries
  FoundRun run_;
  ServerValues values_;
};

}  // namespace stallwatch::prometheus
