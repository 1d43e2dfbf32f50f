// The recorder's set of collectors: each one's wall time every tick, the thread's CPU time (a
// system call) only at one tick in kCpuEveryTicks, not among the first ticks (cold).
#include "agent/collector_set.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace stallwatch::agent {
namespace {

TEST(CollectorSet, TheThreadsCpuIsReadAtOneTickInEightNotAmongTheFirst) {
  testing::ScratchDir dir;
  testing::writeFile(dir.path() / "proc" / "pressure" / "io",
                     "some avg10=0.00 avg60=0.00 avg300=0.00 total=10\n"
                     "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n");
  collectors::CollectorConfig config;
  config.root = collectors::SystemRoot::under(dir.path());
  CollectorSet set({"pressure", "mounts"}, config, [](storage::AgentEvent) {});
  set.prime({0, 0});
  constexpr int kTicks = 2 * static_cast<int>(CollectorSet::kCpuEveryTicks);
  for (int n = 1; n <= kTicks; ++n) {
    collectors::SampleBatch batch;
    set.collect({n * 1'000'000'000LL, n * 1000LL}, batch);
    if (n == 3) {
      for (const auto& s : set.stats()) EXPECT_EQ(s.cpu_collections, 0u) << s.name;
    }
  }
  const auto stats = set.stats();
  ASSERT_EQ(stats.size(), 2u);
  for (const auto& s : stats) {
    EXPECT_EQ(s.data + s.no_data + s.errors, static_cast<uint64_t>(kTicks) + 1) << s.name;
    EXPECT_EQ(s.cpu_collections, 2u) << s.name;
    EXPECT_GT(s.total_time.count(), 0) << s.name;
  }
}

}  // namespace
}  // namespace stallwatch::agent
