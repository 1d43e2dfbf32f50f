// /proc/stat's CPU lines and the busy cores of an interval (collectors/host/cpu_stat.h).
#include "collectors/host/cpu_stat.h"

#include <gtest/gtest.h>

namespace stallwatch::collectors {
namespace {

TEST(SystemStat, EachKernelLayoutAndMalformedLines) {
  struct Case {
    const char* name;
    const char* text;
    bool all;
    uint32_t cpus;
    size_t skipped;
  };
  const Case cases[] = {
      {"empty", "", false, 0, 0},
      {"ten columns (2.6.33+)",
       "cpu  100 2 30 800 40 1 5 7 0 0\ncpu0 50 1 15 400 20 1 3 4 0 0\n"
       "cpu1 50 1 15 400 20 0 2 3 0 0\nintr 1 2 3\nctxt 99\n",
       true, 2, 0},
      {"four columns (oldest)", "cpu 10 0 5 85\ncpu0 10 0 5 85\n", true, 1, 0},
      {"too few fields", "cpu 10 0 5\n", false, 0, 1},
      {"not a number", "cpu 10 x 5 85 0\ncpu0 1 2 3 4\n", false, 1, 1},
      {"cpuN before cpu", "cpu3 1 2 3 4 5\ncpu 1 2 3 4 5\n", true, 1, 0},
  };
  for (const Case& c : cases) {
    const SystemStatParse p = parseSystemStat(c.text);
    EXPECT_EQ(p.all.has_value(), c.all) << c.name;
    EXPECT_EQ(p.cpus, c.cpus) << c.name;
    EXPECT_EQ(p.skipped.size(), c.skipped) << c.name;
  }
  const SystemStatParse p = parseSystemStat("cpu  100 2 30 800 40 1 5 7 0 0\n");
  ASSERT_TRUE(p.all);
  EXPECT_EQ(p.all->busy(), 100u + 2 + 30 + 1 + 5 + 7);
  EXPECT_EQ(p.all->total(), 985u);
}

// 16 CPUs, 1600 ticks elapsed: 600 busy is 6 cores, 100 in I/O wait is 1 core. A counter that
// went backwards (a CPU taken offline, a wrap) gives none.
TEST(SystemStat, BusyCoresOfAnInterval) {
  const CpuTimes before{1000, 0, 0, 5000, 0, 0, 0, 0};
  const CpuTimes after{1500, 0, 100, 5900, 100, 0, 0, 0};
  const auto s = cpuSample(before, after, 16);
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->busy_cores, 6.0);
  EXPECT_DOUBLE_EQ(s->iowait_cores, 1.0);
  EXPECT_EQ(s->online_cpus, 16u);
  EXPECT_FALSE(cpuSample(after, before, 16));
  EXPECT_FALSE(cpuSample(before, before, 16));
  EXPECT_FALSE(cpuSample(before, after, 0));
}

}  // namespace
}  // namespace stallwatch::collectors
