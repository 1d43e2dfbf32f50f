// The run across nodes: which recordings are one run, and the clock check's limits. The
// verdicts themselves are tested end to end on synthetic recordings (test_fleet_e2e.py).
#include "correlator/fleet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "correlator/fleet_limiters.h"
#include "storage/runs_across_nodes.h"

namespace stallwatch {
namespace {

storage::JobRecord job(const std::string& key, int64_t from, std::optional<int64_t> to,
                       const std::string& labels = "") {
  storage::JobRecord j;
  j.key = key;
  j.started_ms = from;
  j.ended_ms = to;
  j.labels = labels;
  return j;
}

TEST(GroupRuns, OneKeyAtOverlappingTimesIsOneRunAndTheNextRunIsAnother) {
  // dist: keys are reused by the next run on the same rendezvous address.
  const std::vector<std::vector<storage::JobRecord>> per_recording = {
      {job("dist:10.0.0.1:29500", 0, 100, "RANK=0,WORLD_SIZE=2"),
       job("dist:10.0.0.1:29500", 500, 600), job("pid:42:7", 0, 100)},
      {job("dist:10.0.0.1:29500", 5, 101), job("dist:10.0.0.1:29500", 505, std::nullopt)},
  };
  const auto runs = storage::groupRuns(per_recording);
  ASSERT_EQ(runs.size(), 2u);  // the pid: job is one node's own
  EXPECT_EQ(runs[0].jobs.size(), 2u);
  EXPECT_EQ(runs[0].from_ms, 0);
  EXPECT_EQ(runs[0].to_ms, 101);
  EXPECT_EQ(runs[0].world_size, 2);
  EXPECT_EQ(runs[1].jobs.size(), 2u);
  EXPECT_EQ(runs[1].jobs[1].recording, 1u);
  EXPECT_FALSE(runs[1].world_size.has_value());
}

TEST(GroupRuns, AWorldSizePastBeliefIsNotTaken) {
  // Issue 46: any process can set WORLD_SIZE; a report lists the ranks it lacks.
  const std::vector<std::vector<storage::JobRecord>> per_recording = {
      {job("slurm:9", 0, 100, "RANK=0,WORLD_SIZE=999999999")},
      {job("slurm:10", 0, 100, "RANK=0,WORLD_SIZE=0")},
      {job("slurm:11", 0, 100, "RANK=0,WORLD_SIZE=1048576")}};
  const auto runs = storage::groupRuns(per_recording);
  ASSERT_EQ(runs.size(), 3u);
  std::map<std::string, std::optional<int32_t>> world;
  for (const auto& r : runs) world[r.key] = r.world_size;
  EXPECT_FALSE(world.at("slurm:9").has_value());
  EXPECT_FALSE(world.at("slurm:10").has_value());
  EXPECT_EQ(world.at("slurm:11"), 1 << 20);
}

TEST(GroupRuns, ARestartInOneRecordingKeepsTheLongestJob) {
  const std::vector<std::vector<storage::JobRecord>> per_recording = {
      {job("slurm:77.0", 0, 10), job("slurm:77.0", 5, 200)},
      {job("slurm:77.0", 0, 200)},
  };
  const auto runs = storage::groupRuns(per_recording);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].jobs.size(), 2u);
  EXPECT_EQ(runs[0].skipped_restarts, 1u);
  EXPECT_EQ(runs[0].jobs[0].job.started_ms, 5);
}

correlator::NodeJob node(const std::string& name, int32_t rank, int64_t shift_ms, bool flat) {
  correlator::NodeJob n;
  n.node = name;
  n.ranks = {rank};
  for (int i = 0; i < 400; ++i) {
    const size_t k = model::appendInterval(n.summary, 1'000'000 + i * 1000 + shift_ms, 1.0);
    n.summary.steps[k] = flat ? 10.0 : 8.0 + (i * 7 + i / 13) % 5;
    n.summary.gpu_util_percent[k] = 90.0;
  }
  n.summary.gpu_count = 1;
  model::RankSeries& r = model::addRank(n.summary, rank);
  r.gpu_util_percent = n.summary.gpu_util_percent;
  return n;
}

TEST(FleetClocks, AnOffsetIsFoundFromTheRhythmOfTheSteps) {
  const auto f = correlator::analyzeFleet({node("a", 0, 0, false), node("b", 1, 7000, false)}, {});
  ASSERT_EQ(f.clocks.size(), 2u);
  EXPECT_TRUE(f.clocks[1].checked);
  EXPECT_TRUE(f.clocks[1].corrected);
  EXPECT_EQ(f.clocks[1].offset_ms, 7000);
  EXPECT_EQ(f.series.size(), 400u);  // lined up: one slot per interval, not 407
  EXPECT_TRUE(f.incidents.empty());
}

TEST(FleetClocks, FlatProgressCannotBeLinedUpAndSaysSo) {
  const auto f = correlator::analyzeFleet({node("a", 0, 0, true), node("b", 1, 7000, true)}, {});
  EXPECT_FALSE(f.clocks[1].checked);
  EXPECT_FALSE(f.clocks[1].corrected);
  EXPECT_EQ(f.clocks[1].offset_ms, 0);
  EXPECT_EQ(f.series.size(), 407u);  // each node on its own clock
}

TEST(FleetClocks, WorldSizeNamesTheRanksWithoutARecording) {
  const auto f = correlator::analyzeFleet({node("a", 0, 0, false), node("c", 2, 0, false)}, {}, 4);
  EXPECT_EQ(f.missing_ranks, (std::vector<int32_t>{1, 3}));
}

// A run of NODES nodes read through a NodeReader, one sample a second for SECONDS: steps in one
// rhythm on every node, GPUs busy; from STALL_AT for STALL_FOR seconds node STRAGGLER's GPU
// idles and its data wait rises while the others spin (busy, no steps anywhere). JITTER_MS: each
// node's ticks land up to this early or late, alternately. Counts each node's reads.
struct SyntheticRun {
  size_t nodes = 4;
  int64_t seconds = 3600, stall_at = 1800, stall_for = 60;
  size_t straggler = 2;
  int64_t jitter_ms = 0;
  std::vector<std::vector<model::NodeSampleFields>> reads;

  std::vector<correlator::FleetNode> given() const {
    std::vector<correlator::FleetNode> g;
    for (size_t n = 0; n < nodes; ++n)
      g.push_back({"n" + std::to_string(n),
                   {static_cast<int32_t>(n)},
                   1,
                   100 + static_cast<uint32_t>(n),
                   "GPU-" + std::to_string(n)});
    return g;
  }
  correlator::NodeReader reader() {
    reads.assign(nodes, {});
    return [this](size_t n, model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
      reads[n].push_back(fields);
      for (int64_t i = 0; i < seconds; ++i) {
        model::NodeSample x;
        const int64_t jitter = i % 2 ? jitter_ms : -jitter_ms;
        x.ts_ms = 5'000'000 + i * 1000 + static_cast<int64_t>(n) * 7 + jitter;
        x.interval_s = 1.0;
        const bool stalled = i >= stall_at && i < stall_at + stall_for;
        const bool starved = stalled && n == straggler;
        x.steps = stalled ? 0.0 : 8.0 + static_cast<double>((i * 7 + i / 13) % 5);
        x.gpu_util_percent = starved ? 2.0 : 95.0;
        x.rank_gpu_util_percent = x.gpu_util_percent;
        x.data_wait_s = starved ? 0.9 : 0.05;
        x.rank_data_wait_s = x.data_wait_s;
        x.read_bytes_per_s = 1e8;
        x.workers_cpu = 2.0;
        sink(x);
      }
    };
  }
};

TEST(FleetStreaming, EachNodeIsReadTwiceARowAtATimeAndTheStragglerNamed) {
  SyntheticRun run;
  const auto f = correlator::analyzeFleet(run.given(), run.reader(), {});
  for (const auto& r : run.reads) {
    EXPECT_EQ(r, (std::vector<model::NodeSampleFields>{model::NodeSampleFields::kProgress,
                                                       model::NodeSampleFields::kAll}));
  }
  EXPECT_EQ(f.grid_ms, 1000);
  EXPECT_EQ(f.series.size(), 3600u);
  ASSERT_EQ(f.incidents.size(), 1u);
  EXPECT_EQ(f.incidents[0].straggler_node, std::optional<size_t>(2));
  ASSERT_TRUE(f.incidents[0].incident.straggler);
  EXPECT_EQ(f.incidents[0].incident.straggler->rank, 2);
  EXPECT_EQ(f.incidents[0].incident.straggler->pid, 102u);
  // The nodes' own series are kept compactly, not as model::Series on the job's ranks.
  EXPECT_TRUE(f.series.ranks[2].gpu_util_percent.empty());
  EXPECT_EQ(f.columns[2].at(correlator::NodeColumns::kGpuUtil, 1810), 2.0);
  EXPECT_EQ(f.columns[1].at(correlator::NodeColumns::kGpuUtil, 1810), 95.0);
}

TEST(FleetStreaming, TicksAFewMillisecondsOffTheirPhaseStayInTheirOwnInterval) {
  SyntheticRun run;
  run.jitter_ms = 40;
  const auto f = correlator::analyzeFleet(run.given(), run.reader(), {});
  EXPECT_EQ(f.series.size(), 3600u);
  for (size_t n = 0; n < run.nodes; ++n) {
    size_t held = 0;
    for (size_t i = 0; i < f.series.size(); ++i)
      held += f.columns[n].at(correlator::NodeColumns::kWorkersCpu, i).has_value();
    EXPECT_EQ(held, 3600u) << "node " << n;
  }
}

TEST(FleetStreaming, ABoundOnMemoryCoarsensTheGridAndTheStragglerIsStillNamed) {
  SyntheticRun run;
  run.nodes = 16;
  run.straggler = 11;
  run.seconds = 43'200;  // past the clock check's first 4 h, which the bound does not coarsen
  run.stall_at = 30'000;
  const auto whole = correlator::analyzeFleet(run.given(), run.reader(), {});
  correlator::FleetOptions bounded;
  bounded.max_series_bytes = whole.series_bytes / 3;
  const auto f = correlator::analyzeFleet(run.given(), run.reader(), {}, {}, bounded);
  EXPECT_EQ(whole.grid_ms, 1000);
  EXPECT_GE(f.grid_ms, 3000);
  EXPECT_EQ(f.grid_ms % 1000, 0);
  EXPECT_EQ(f.interval_ms, 1000);
  EXPECT_LE(f.series_bytes, bounded.max_series_bytes);
  EXPECT_LE(f.series.size(), 43'200u / 3);
  ASSERT_EQ(f.incidents.size(), 1u);
  EXPECT_EQ(f.incidents[0].straggler_node, std::optional<size_t>(11));
  // Steps summed over each coarse interval: the run's rate is unchanged.
  const auto& s = f.series;
  ASSERT_TRUE(s.steps[10].has_value());
  EXPECT_NEAR(*s.steps[10] / s.interval_s[10], *whole.series.steps[100] / 1.0 * 0 + 16 * 10.0,
              16 * 2.0);
}

TEST(FleetStreaming, NodesWithoutSamplesAreNotJudged) {
  SyntheticRun run;
  auto inner = run.reader();
  auto read = [&](size_t n, model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
    if (n != 1) inner(n, fields, sink);
  };
  const auto f = correlator::analyzeFleet(run.given(), read, {}, 8);
  EXPECT_EQ(f.nodes, (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(f.samples, (std::vector<size_t>{3600, 3600, 3600}));
  EXPECT_EQ(f.missing_ranks, (std::vector<int32_t>{1, 4, 5, 6, 7}));
  ASSERT_EQ(f.incidents.size(), 1u);
  EXPECT_EQ(f.incidents[0].straggler_node, std::optional<size_t>(1));  // n2, among the judged
  ASSERT_EQ(f.series.ranks.size(), 3u);
  EXPECT_EQ(f.series.ranks[1].node, "n2");
  ASSERT_TRUE(f.incidents[0].incident.straggler);
  EXPECT_EQ(f.incidents[0].incident.straggler->pid, 102u);
}

model::LimiterVerdict verdictOf(model::Limiter l, double wait, double seconds, double gpus) {
  model::LimiterVerdict v;
  v.limiter = l;
  v.wait_source = model::WaitSource::kSampled;
  v.input_wait_share = wait;
  v.seconds = seconds;
  v.gpus = gpus;
  v.input_wait_gpu_seconds = wait * seconds * gpus;
  return v;
}

TEST(FleetLimiters, TheSlowestInputIsAnInputBoundNodeAndTheHoursAddUp) {
  using model::Limiter;
  // A GPU-bound node of 8 GPUs waiting 9 %, an input-bound one of 4 waiting 50 %, one unjudged.
  const auto l = correlator::summarizeFleetLimiters({verdictOf(Limiter::kGpu, 0.09, 3600, 8),
                                                     verdictOf(Limiter::kInputCpu, 0.5, 3600, 4),
                                                     std::nullopt});
  ASSERT_TRUE(l.slowest_input_node.has_value());
  EXPECT_EQ(*l.slowest_input_node, 1u);
  EXPECT_NEAR(l.wait_gpu_hours[static_cast<size_t>(Limiter::kInputCpu)], 2.0, 1e-9);
  EXPECT_NEAR(l.wait_gpu_hours[static_cast<size_t>(Limiter::kGpu)], 0.72, 1e-9);
  EXPECT_EQ(l.run_limiter, Limiter::kGpu);  // 8 of its 12 GPUs' time
  // Only GPU-bound nodes: no node's input held the run back.
  const auto gpu = correlator::summarizeFleetLimiters({verdictOf(Limiter::kGpu, 0.05, 60, 1)});
  EXPECT_FALSE(gpu.slowest_input_node.has_value());
  EXPECT_FALSE(correlator::summarizeFleetLimiters({std::nullopt}).run_limiter.has_value());
}

}  // namespace
}  // namespace stallwatch
