// /proc/stat's CPU lines and the busy cores of an interval (collectors/host/cpu_stat.h).
#include "collectors/host/cpu_stat.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

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
  EXPECT_EQ(s->iowait_cores, 1.0);
  EXPECT_EQ(s->online_cpus, 16u);
  EXPECT_FALSE(cpuSample(after, before, 16));
  EXPECT_FALSE(cpuSample(before, before, 16));
  EXPECT_FALSE(cpuSample(before, after, 0));
}

TEST(CgroupCpuUsage, TheUsageLineOfTheRootsCpuStat) {
  EXPECT_EQ(parseCgroupCpuUsage("usage_usec 29334829891\nuser_usec 23721672758\n"), 29334829891u);
  EXPECT_EQ(parseCgroupCpuUsage("user_usec 5\nsystem_usec 6\nusage_usec 11\n"), 11u);
  EXPECT_FALSE(parseCgroupCpuUsage("user_usec 5\nsystem_usec 6\n"));
  EXPECT_FALSE(parseCgroupCpuUsage("usage_usec -3\n"));
  EXPECT_FALSE(parseCgroupCpuUsage("usage_usec\n"));
  EXPECT_FALSE(parseCgroupCpuUsage(""));
}

// The host's root cgroup only: a v1 host has none, a cgroup namespace's root (a container's
// cgroup, whose figures are its own) has a cgroup.type, a bind mount of a subtree a root of its
// own, and a kernel before 5.8 no cpu.stat at the root.
TEST(CgroupCpuUsage, OnlyTheHostsRootCgroupGivesTheHostsBusyTime) {
  const char* v2 = "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  const char* v1 = "30 24 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n";
  const char* subtree = "30 24 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  struct Case {
    const char* name;
    const char* mountinfo;
    bool cgroup_type, cpu_stat, found;
  };
  const Case cases[] = {
      {"the root", v2, false, true, true},
      {"v1 only", v1, false, true, false},
      {"a cgroup namespace's root", v2, true, true, false},
      {"a subtree mounted", subtree, false, true, false},
      {"no cpu.stat at the root", v2, false, false, false},
  };
  for (const Case& c : cases) {
    testing::ScratchDir dir;
    testing::writeFile(dir.path() / "proc" / "self" / "mountinfo", c.mountinfo);
    const auto cgroup = dir.path() / "sys" / "fs" / "cgroup";
    std::filesystem::create_directories(cgroup);
    if (c.cpu_stat) testing::writeFile(cgroup / "cpu.stat", "usage_usec 1\n");
    if (c.cgroup_type) testing::writeFile(cgroup / "cgroup.type", "domain\n");
    const auto path = hostCpuStatPath(SystemRoot::under(dir.path()));
    EXPECT_EQ(path.has_value(), c.found) << c.name;
    if (path && c.found) {
      EXPECT_EQ(*path, cgroup / "cpu.stat") << c.name;
    }
  }
}

// Busy cores from /proc/stat until ten ticks passed without steal, then from cpu.stat with
// /proc/stat every tenth tick (the CPUs online, the steal) and no I/O wait; a window that counted
// steal hands the ticks back to /proc/stat until ten pass without.
TEST(CpuStatCollector, BusyTimeFromTheRootsCpuStatWhileTheCpusCountNoSteal) {
  testing::ScratchDir dir;
  const auto stat = dir.path() / "proc" / "stat";
  const auto cpu_stat = dir.path() / "cpu.stat";
  // Two CPUs: TOTAL ticks so far, USER busy, IOWAIT in I/O wait, STEAL stolen, the rest idle.
  const auto writeStat = [&](uint64_t total, uint64_t user, uint64_t iowait, uint64_t steal) {
    testing::writeFile(stat, fmt::format("cpu  {} 0 0 {} {} 0 0 {} 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n"
                                         "cpu1 1 0 0 1 0 0 0 0 0 0\n",
                                         user, total - user - iowait - steal, iowait, steal));
  };
  const auto writeUsage = [&](uint64_t us) {
    testing::writeFile(cpu_stat, fmt::format("usage_usec {}\nuser_usec 0\n", us));
  };
  auto collector = makeCpuStatCollector(SystemRoot::under(dir.path()), cpu_stat);
  const auto tick = [&](int64_t second) {
    SampleBatch batch;
    const CollectResult r = collector->collect({second * 1'000'000'000, second * 1000}, batch);
    return std::pair{r, batch.cpu};
  };
  CollectResult r;
  std::optional<CpuSample> cpu;
  // Ten ticks from /proc/stat: one core busy of 200 ticks a second.
  writeUsage(0);
  for (int64_t t = 0; t <= 10; ++t) {
    writeStat(1000 + 200 * t, 100 + 100 * t, 0, 0);
    if (t == 10) writeUsage(5'000'000);
    std::tie(r, cpu) = tick(t);
    EXPECT_EQ(r.outcome, t == 0 ? Outcome::kNoData : Outcome::kData) << t;
    if (t > 0) {
      ASSERT_TRUE(cpu) << t;
      EXPECT_DOUBLE_EQ(cpu->busy_cores, 1.0) << t;
      EXPECT_EQ(cpu->iowait_cores, 0.0) << t;
      EXPECT_EQ(cpu->online_cpus, 2u);
    }
  }
  // From cpu.stat: a quarter of a core a second, no I/O wait told. /proc/stat is read at the
  // tenth tick only: online CPUs that changed at once show there.
  writeStat(5000, 1100, 1000, 0);
  // And one tick of steal in the window: 0.0005 cores, below what /proc/stat resolves.
  const std::string one_cpu = "cpu  1100 0 0 2899 1000 0 0 1 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n";
  testing::writeFile(stat, one_cpu);
  for (int64_t t = 11; t <= 20; ++t) {
    writeUsage(5'000'000 + static_cast<uint64_t>(t - 10) * 250'000);
    std::tie(r, cpu) = tick(t);
    ASSERT_TRUE(cpu) << t;
    EXPECT_DOUBLE_EQ(cpu->busy_cores, 0.25) << t;
    EXPECT_FALSE(cpu->iowait_cores) << t;
    EXPECT_EQ(cpu->online_cpus, t < 20 ? 2u : 1u) << t;
  }
  // The CPUs count steal: 400 ticks of the window's 2 000, 0.4 cores, added at its last tick;
  // /proc/stat every tick after it.
  writeStat(7000, 1100, 1000, 401);
  for (int64_t t = 21; t <= 30; ++t) {
    writeUsage(7'500'000 + static_cast<uint64_t>(t - 20) * 250'000);
    std::tie(r, cpu) = tick(t);
    ASSERT_TRUE(cpu) << t;
    EXPECT_DOUBLE_EQ(cpu->busy_cores, t < 30 ? 0.25 : 0.65) << t;
  }
  writeUsage(0);  // not read while /proc/stat serves
  for (int64_t t = 31; t <= 41; ++t) {
    if (t == 41) writeUsage(1'000'000);  // read at the tick that hands over: the next from it
    // 100 ticks stolen at the first, none after: one core busy (the steal or the user time).
    writeStat(7000 + 200 * (t - 30), 1100 + (t == 31 ? 0 : 100 * (t - 31)), 1000, 501);
    std::tie(r, cpu) = tick(t);
    ASSERT_TRUE(cpu) << t;
    EXPECT_DOUBLE_EQ(cpu->busy_cores, 1.0) << t;
    EXPECT_EQ(cpu->iowait_cores, 0.0) << t;
  }
  std::tie(r, cpu) = tick(42);
  ASSERT_TRUE(cpu);
  EXPECT_DOUBLE_EQ(cpu->busy_cores, 0.0);
  EXPECT_EQ(collector->finalReport(),
            "cpu: busy time from the root cgroup's cpu.stat at 21 ticks, from /proc/stat at 22 (24 "
            "reads of it)");
}

// cpu.stat gone (the cgroup2 mount taken away): said once, and the next ticks from /proc/stat,
// primed again rather than a rate over the ticks since its last reading.
TEST(CpuStatCollector, ACpuStatThatGoesAwayHandsTheTicksBackToProcStat) {
  testing::ScratchDir dir;
  const auto stat = dir.path() / "proc" / "stat";
  const auto cpu_stat = dir.path() / "cpu.stat";
  auto collector = makeCpuStatCollector(SystemRoot::under(dir.path()), cpu_stat);
  const auto tick = [&](int64_t t) {
    testing::writeFile(stat, fmt::format("cpu  {} 0 0 {} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n",
                                         100 * t, 100 * t));  // half a core busy
    SampleBatch batch;
    const CollectResult r = collector->collect({t * 1'000'000'000, t * 1000}, batch);
    return std::pair{r, batch.cpu};
  };
  for (int64_t t = 0; t <= 12; ++t) {
    testing::writeFile(cpu_stat, fmt::format("usage_usec {}\n", 500'000 * t));
    const auto [r, cpu] = tick(t);
    EXPECT_TRUE(r.notice.empty()) << t;
    if (t > 0) {
      ASSERT_TRUE(cpu) << t;
      EXPECT_DOUBLE_EQ(cpu->busy_cores, 0.5) << t;
      EXPECT_EQ(cpu->iowait_cores.has_value(), t <= 10) << t;
    }
  }
  std::filesystem::remove(cpu_stat);
  auto [r, cpu] = tick(13);
  EXPECT_NE(r.notice.find("busy time from /proc/stat"), std::string::npos) << r.notice;
  EXPECT_EQ(r.outcome, Outcome::kNoData);
  EXPECT_FALSE(cpu);
  std::tie(r, cpu) = tick(14);
  EXPECT_TRUE(r.notice.empty());
  ASSERT_TRUE(cpu);
  EXPECT_DOUBLE_EQ(cpu->busy_cores, 0.5);
  EXPECT_EQ(cpu->iowait_cores, 0.0);
}

}  // namespace
}  // namespace stallwatch::collectors
