#include <gtest/gtest.h>

#include "model/series.h"

namespace stallwatch::model {
namespace {

TEST(SeriesBuilder, EverySeriesKeepsTheLengthOfTheTimeAxis) {
  JobSeries s;
  appendInterval(s, 1000, 1.0);
  addDevice(s, "loop0", "", true);  // found after one interval: an empty history
  addRank(s, 1);
  const size_t i = appendInterval(s, 2000, 1.0);
  EXPECT_EQ(i, 1u);
  s.devices[0].r_await_ms[i] = 3.0;
  s.forEachSeries([&](Series& x) { EXPECT_EQ(x.size(), 2u); });
  EXPECT_FALSE(s.devices[0].r_await_ms[0].has_value());
  EXPECT_DOUBLE_EQ(*s.devices[0].r_await_ms[1], 3.0);
}

// Whatever order they are found in, devices and ranks come out in one order, so the live and
// the post-mortem evidence list them alike.
TEST(SeriesBuilder, DevicesAndRanksHaveOneOrder) {
  JobSeries s;
  appendInterval(s, 1000, 1.0);
  addDevice(s, "zram0", "", false);
  addDevice(s, "vda", "", true);       // the job's scripts
  addDevice(s, "vda", "loop0", true);  // and under the dataset's loop device
  addDevice(s, "nvme1n1", "loop1", true);
  addDevice(s, "loop0", "", true);
  std::vector<std::string> names;
  for (const auto& d : s.devices) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"loop0", "vda", "nvme1n1", "zram0"}));
  EXPECT_EQ(s.devices[1].via, "loop0");
  EXPECT_TRUE(s.devices[1].also_direct);
  EXPECT_FALSE(s.devices[2].direct());
  addRank(s, 3);
  addRank(s, 0);
  addRank(s, 3).pid = 42;
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].rank, 0);
  EXPECT_EQ(s.ranks[1].pid, 42u);
}

TEST(SeriesBuilder, TailAndDropFrontCutEverySeriesAlike) {
  JobSeries s;
  addRank(s, 0);
  addDevice(s, "vda", "", true);
  for (int k = 0; k < 5; ++k) {
    const size_t i = appendInterval(s, 1000 * (k + 1), 1.0);
    s.steps[i] = k;
    s.ranks[0].steps[i] = k;
    s.devices[0].aqu_sz[i] = k;
  }
  const JobSeries t = tailOf(s, 3);
  EXPECT_EQ(t.ts_ms, (std::vector<int64_t>{4000, 5000}));
  EXPECT_DOUBLE_EQ(*t.steps[0], 3.0);
  EXPECT_DOUBLE_EQ(*t.ranks[0].steps[1], 4.0);
  EXPECT_DOUBLE_EQ(*t.devices[0].aqu_sz[0], 3.0);
  EXPECT_EQ(s.size(), 5u);  // the source is untouched
  dropFront(s, 4);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(*s.devices[0].aqu_sz[0], 4.0);
  EXPECT_EQ(tailOf(s, 9).size(), 0u);
}

}  // namespace
}  // namespace stallwatch::model
