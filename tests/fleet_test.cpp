// The run across nodes: which recordings are one run, and the clock check's limits. The
// verdicts themselves are tested end to end on synthetic recordings (test_fleet_e2e.py).
#include "correlator/fleet.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace stallwatch
