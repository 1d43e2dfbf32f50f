// The job's own cgroup (v2): its files' parsers, the figures of an interval, and the verdict
// that names the limit a job ran into.
#include "collectors/jobs/job_cgroup.h"

#include <gtest/gtest.h>

#include "correlator/stall_detector.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

TEST(Cgroup, ParsesIoMaxAndIoStat) {
  const auto limits = parseIoMax(
      "254:0 rbps=4194304 wbps=max riops=max wiops=max\n8:0 rbps=max wbps=max riops=300 "
      "wiops=max\nbad line\n");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(limits[0].major, 254u);
  EXPECT_EQ(limits[0].rbps, 4194304u);
  EXPECT_FALSE(limits[0].wbps);
  EXPECT_EQ(limits[1].riops, 300u);
  EXPECT_FALSE(limits[1].rbps);
  const auto stats = parseIoStat(
      "254:0 rbytes=1048576 wbytes=4096 rios=16 wios=1 dbytes=0 dios=0\n7:1 rbytes=x\n");
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[0].rbytes, 1048576u);
  EXPECT_EQ(stats[0].rios, 16u);
  EXPECT_EQ(stats[1].rbytes, 0u);  // a value it cannot read is 0, the line kept
}

TEST(Cgroup, ParsesMemoryLimitsAndCpuLists) {
  EXPECT_EQ(parseMemoryLimit("8589934592\n"), 8589934592u);
  EXPECT_FALSE(parseMemoryLimit("max\n"));
  EXPECT_FALSE(parseMemoryLimit("lots\n"));
  EXPECT_EQ(countCpuList("0-15\n"), 16u);
  EXPECT_EQ(countCpuList("0,2-5,8"), 6u);
  EXPECT_EQ(countCpuList("3"), 1u);
  EXPECT_FALSE(countCpuList(""));
  EXPECT_FALSE(countCpuList("5-2"));
  EXPECT_FALSE(countCpuList("0-x"));
}

// Who else used a device: the leaf cgroups' io.stat, twice, a second apart. The job's own
// cgroup and the devices it does not use are left out; the heaviest comes first; a cgroup with
// children is not named (its children are).
TEST(Cgroup, DeviceUsersAreTheOtherLeafCgroupsOnTheJobsDevices) {
  testing::ScratchDir dir;
  const auto root = dir.path();
  testing::writeFile(root / "proc/self/mountinfo",
                     "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  const auto cg = root / "sys/fs/cgroup";
  auto stat = [&](const char* where, uint64_t vda_read, uint64_t vdb_read) {
    testing::writeFile(cg / where / "io.stat",
                       "254:0 rbytes=" + std::to_string(vda_read) + " wbytes=4096 rios=1 wios=1\n" +
                           "254:16 rbytes=" + std::to_string(vdb_read) + " wbytes=0\n");
  };
  stat("job", 0, 0);
  stat("system.slice/backup.service", 0, 0);
  stat("system.slice/cron.service", 0, 0);
  stat("system.slice", 0, 0);  // an inner cgroup: not a leaf
  const CgroupReader reader(SystemRoot::under(root));
  ASSERT_TRUE(reader.available());
  const auto before = reader.leafIoStats(100).leaves;
  EXPECT_EQ(before.size(), 3u) << "job, backup.service and cron.service";
  stat("job", 900'000'000, 0);
  stat("system.slice/backup.service", 180'000'000, 50'000'000);
  stat("system.slice/cron.service", 3'000'000, 0);
  const auto after = reader.leafIoStats(100).leaves;
  auto name = [](uint32_t, uint32_t minor) { return minor == 0 ? "vda" : "vdb"; };
  const auto users = deviceUsers(before, after, 1.0, {{254, 0}}, {cg / "job"}, cg, name);
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[0].cgroup, "/system.slice/backup.service");
  EXPECT_EQ(users[0].device, "vda");
  EXPECT_DOUBLE_EQ(users[0].read_bytes_per_second, 180e6);
  EXPECT_EQ(users[1].cgroup, "/system.slice/cron.service");
  // Stored and read back as text; a line it cannot read is skipped.
  const std::string text = encodeDeviceUsers(users);
  EXPECT_EQ(parseDeviceUsers(text), users);
  EXPECT_EQ(parseDeviceUsers(text + "\nvda\t/x\tnot-a-number\t0\n\n"), users);
  // At most TOP per device, each at least FLOOR bytes/s.
  EXPECT_EQ(deviceUsers(before, after, 1.0, {{254, 0}}, {}, cg, name, 1).size(), 1u);
  EXPECT_EQ(deviceUsers(before, after, 1.0, {{254, 0}}, {}, cg, name, 3, 5e6).size(), 2u)
      << "the job's own cgroup, when not left out, and the backup";
  // The cgroups walked are bounded.
  EXPECT_LE(reader.leafIoStats(2).leaves.size(), 1u);
}

// Issue 47: a cgroup's children have io.stat only where it hands them the io controller
// (cgroup.subtree_control), so a subtree without it is not walked: most of a systemd host's
// cgroups. (The fixture's io.stat below such a subtree stands for what a walk would have read.)
TEST(Cgroup, ASubtreeWithoutTheIoControllerIsNotWalked) {
  testing::ScratchDir dir;
  const auto root = dir.path();
  testing::writeFile(root / "proc/self/mountinfo",
                     "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  const auto cg = root / "sys/fs/cgroup";
  testing::writeFile(cg / "cgroup.subtree_control", "cpu io memory pids\n");
  testing::writeFile(cg / "kubepods/cgroup.subtree_control", "cpu memory io\n");  // io last
  testing::writeFile(cg / "system.slice/cgroup.subtree_control", "memory pids\n");
  testing::writeFile(cg / "user.slice/cgroup.subtree_control", "\n");
  for (const char* leaf :
       {"kubepods/pod1", "system.slice/cron.service", "user.slice/session-1.scope"})
    testing::writeFile(cg / leaf / "io.stat", "254:0 rbytes=4096 wbytes=0\n");
  const CgroupReader reader(SystemRoot::under(root));
  std::vector<std::string> walked;
  for (const auto& [where, stats] : reader.leafIoStats(100).leaves)
    walked.push_back(where.lexically_relative(cg).string());
  EXPECT_EQ(walked, std::vector<std::string>{"kubepods/pod1"});
}

// Issue 47: an inner cgroup's io.stat sums its subtree's, so a subtree whose sum did not move
// since the last walk did no I/O: it is not walked again, and its leaves' readings from the last
// walk stand (a Kubernetes node's idle pods). Where the sum moved, its leaves are read afresh.
TEST(Cgroup, ASubtreeThatDidNoIoSinceTheLastWalkIsNotWalkedAgain) {
  testing::ScratchDir dir;
  const auto root = dir.path();
  testing::writeFile(root / "proc/self/mountinfo",
                     "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  const auto cg = root / "sys/fs/cgroup";
  auto io = [&](const std::string& where, uint64_t rbytes) {
    testing::writeFile(cg / where / "io.stat",
                       "254:0 rbytes=" + std::to_string(rbytes) + " wbytes=0 rios=1 wios=0\n");
  };
  for (const char* inner : {"kubepods", "kubepods-besteffort", "system.slice"})
    testing::writeFile(cg / inner / "cgroup.subtree_control", "cpu io memory\n");
  io("kubepods", 300);
  io("kubepods/pod1", 100);
  io("kubepods/pod2", 200);
  io("kubepods-besteffort", 50);  // a sibling whose name extends kubepods': not under it
  io("kubepods-besteffort/pod3", 50);
  io("system.slice", 7);
  io("system.slice/backup.service", 7);
  const CgroupReader reader(SystemRoot::under(root));
  const IoStatWalk first = reader.leafIoStats(100);
  ASSERT_EQ(first.leaves.size(), 4u);
  EXPECT_EQ(first.inner.size(), 3u);
  // pod1's file changes but kubepods' sum does not (the kernel would have moved both): its
  // reading is the last walk's. The backup read more, and system.slice's sum says so.
  io("kubepods/pod1", 999);
  io("system.slice", 9);
  io("system.slice/backup.service", 9);
  io("kubepods-besteffort", 60);
  io("kubepods-besteffort/pod3", 60);
  const IoStatWalk second = reader.leafIoStats(100, &first);
  auto read_of = [&](const IoStatWalk& w, const std::string& where) -> uint64_t {
    const auto it = w.leaves.find(cg / where);
    return it == w.leaves.end() || it->second.empty() ? 0 : it->second[0].rbytes;
  };
  EXPECT_EQ(read_of(second, "kubepods/pod1"), 100u) << "carried over, not read";
  EXPECT_EQ(read_of(second, "kubepods/pod2"), 200u);
  EXPECT_EQ(read_of(second, "kubepods-besteffort/pod3"), 60u);
  EXPECT_EQ(read_of(second, "system.slice/backup.service"), 9u);
  EXPECT_EQ(second.leaves.size(), 4u);
  // Without the last walk, everything is read.
  EXPECT_EQ(read_of(reader.leafIoStats(100), "kubepods/pod1"), 999u);
}

TEST(Cgroup, ParsesCpuMaxCpuStatAndTheV2Path) {
  EXPECT_FALSE(parseCpuMax("max 100000")->quota_us);
  EXPECT_EQ(parseCpuMax("50000 100000")->quota_us, 50000u);
  EXPECT_EQ(parseCpuMax("50000 100000\n")->quota_us, 50000u);  // as the kernel writes it
  EXPECT_EQ(parseCpuMax("max 100000\n")->period_us, 100000u);
  EXPECT_FALSE(parseCpuMax("50000"));
  EXPECT_FALSE(parseCpuMax("50000 0"));
  const auto stat = parseCpuStat(
      "usage_usec 9000000\nuser_usec 8000000\nsystem_usec 1000000\nnr_periods 100\n"
      "nr_throttled 40\nthrottled_usec 2500000\n");
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->usage_us, 9000000u);
  EXPECT_EQ(stat->throttled_us, 2500000u);
  EXPECT_FALSE(parseCpuStat("nr_periods 1\n"));
  // A hybrid host: v1 controllers, and the v2 hierarchy on the "0::" line.
  EXPECT_EQ(cgroupV2Path("7:blkio:/\n4:memory:/x\n0::/job/rank1\n"), "/job/rank1");
  EXPECT_FALSE(cgroupV2Path("7:blkio:/\n"));
  EXPECT_EQ(describeCpuLimit(parseCpuMax("50000 100000"), "/sys/fs/cgroup/job"),
            "cpu.max 50000 100000 (0.50 CPU) in /sys/fs/cgroup/job");
  EXPECT_EQ(describeCpuLimit(parseCpuMax("max 100000"), "/x"), "");
}

// Two cgroups of one job (a rank each): the figures are those of the one nearest its limit.
TEST(Cgroup, FiguresOfAnIntervalComeFromTheCgroupNearestItsLimit) {
  auto reading = [](uint64_t rbytes, uint64_t io_stall_us, uint64_t throttled_us, bool limited) {
    CgroupReading r;
    r.io = parsePressure("some avg10=0 avg60=0 avg300=0 total=" + std::to_string(io_stall_us) +
                         "\nfull avg10=0 avg60=0 avg300=0 total=0\n")
               .stats;
    if (limited) r.io_max = parseIoMax("254:0 rbps=4194304 wbps=max riops=max wiops=max\n");
    r.io_stat = parseIoStat("254:0 rbytes=" + std::to_string(rbytes) + " wbytes=0 rios=1 wios=0\n");
    r.cpu_stat =
        parseCpuStat("usage_usec 1\nthrottled_usec " + std::to_string(throttled_us) + "\n");
    return r;
  };
  const std::map<std::filesystem::path, CgroupReading> before = {
      {"/cg/rank0", reading(0, 0, 0, false)}, {"/cg/rank1", reading(0, 0, 0, true)}};
  const std::map<std::filesystem::path, CgroupReading> after = {
      {"/cg/rank0", reading(50 << 20, 100000, 0, false)},
      {"/cg/rank1", reading(8 << 20, 1500000, 400000, true)}};
  const CgroupFigures f = cgroupFigures(before, after, 2.0);
  EXPECT_DOUBLE_EQ(*f.limited_read_bytes_per_second, 4 << 20);
  EXPECT_DOUBLE_EQ(*f.read_limit_bytes_per_second, 4194304);
  EXPECT_DOUBLE_EQ(*f.io_some, 0.75);  // the higher of the two
  EXPECT_DOUBLE_EQ(*f.cpu_throttled_ratio, 0.2);
  EXPECT_FALSE(cgroupFigures(before, after, 0).io_some);
}

}  // namespace
}  // namespace stallwatch::collectors

namespace stallwatch::correlator {
namespace {

// 80 one-second intervals with no thread in D; FILL sets interval K's own figures, told
// whether K lies in the window 40..59.
template <typename Fill>
model::JobSeries cgroupJob(Fill fill) {
  model::JobSeries s;
  for (size_t i = 0; i < 80; ++i) {
    const size_t k = model::appendInterval(s, 1'000'000 + static_cast<int64_t>(i) * 1000, 1.0);
    s.d_state_threads[k] = 0;
    fill(s, k, i >= 40 && i < 60);
  }
  return s;
}

// A job reading at its cgroup's io.max limit while its steps fall: io-throttled, the limit
// named in the evidence, whatever the node's pressure says.
TEST(CgroupVerdict, AJobAtItsIoMaxLimitIsIoThrottledAndTheLimitIsNamed) {
  const model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool throttled) {
    j.steps[k] = throttled ? 1.0 : 10.0 + static_cast<double>(k % 3);
    j.io_some[k] = 0.01;  // the node is calm: only the job's cgroup is held
    j.cpu_some[k] = 0.01;
    j.cgroup_io_some[k] = throttled ? 0.9 : 0.02;
    j.cgroup_limited_read_bytes_per_s[k] = throttled ? 4.19e6 : 2.5e6;
    // The limit is set for the window only: named from what was in force then.
    j.cgroup_read_limit_bytes_per_s[k] = throttled ? std::optional<double>(4194304) : std::nullopt;
    j.cgroup_limits[k] = throttled ? "io.max 254:0 (vda) rbps=4.0 MiB/s in /sys/fs/cgroup/job" : "";
    j.cgroup_cpu_throttled[k] = 0;
  });
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& inc = a.incidents[0];
  EXPECT_EQ(inc.cls, model::StallClass::kIoThrottled);
  bool named = false, own_pressure = false;
  for (const auto& e : inc.evidence) {
    named |= e.signal ==
                 "job_cgroup_read_bytes_per_s at io.max 254:0 (vda) rbps=4.0 MiB/s in "
                 "/sys/fs/cgroup/job" &&
             e.supports && e.during > 4e6;
    own_pressure |= e.signal == "io_some (the job's cgroup)" && e.supports;
  }
  EXPECT_TRUE(named);
  EXPECT_TRUE(own_pressure);
}

// Memory pressure in the job's cgroup during a stall is evidence of its own (reclaim turns
// page-cache hits into reads), shown beside what decides the class, never deciding it.
TEST(CgroupVerdict, MemoryPressureIsEvidenceOfItsOwn) {
  const model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool stalled) {
    j.steps[k] = stalled ? 1.0 : 10.0;
    j.io_some[k] = 0.0;
    j.cpu_some[k] = 0.0;
    j.cgroup_io_some[k] = 0.0;
    j.cgroup_memory_some[k] = stalled ? 0.45 : 0.01;
  });
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].cls, model::StallClass::kNotStorage);
  const auto& ev = a.incidents[0].evidence;
  const auto memory = std::find_if(ev.begin(), ev.end(), [](const auto& e) {
    return e.signal == "memory_some (the job's cgroup)";
  });
  ASSERT_NE(memory, ev.end());
  EXPECT_TRUE(memory->supports);
  EXPECT_NEAR(memory->during, 0.45, 1e-9);
}

// A CPU quota that throttles the job's input pipeline: input-cpu, the quota named.
TEST(CgroupVerdict, ACpuQuotaThatStarvesTheJobIsInputCpuAndNamed) {
  const model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool starved) {
    j.steps[k] = starved ? 2.0 : 10.0;
    j.io_some[k] = 0.0;
    j.cpu_some[k] = 0.0;
    j.cgroup_cpu_throttled[k] = starved ? 0.6 : 0.0;
    j.cgroup_limits[k] = starved ? "cpu.max 50000 100000 (0.50 CPU) in /sys/fs/cgroup/job" : "";
  });
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].cls, model::StallClass::kInputCpu);
  bool named = false;
  for (const auto& e : a.incidents[0].evidence) {
    named |= e.signal ==
                 "job_cgroup_cpu_throttled_share under cpu.max 50000 100000 (0.50 CPU) in "
                 "/sys/fs/cgroup/job" &&
             e.supports;
  }
  EXPECT_TRUE(named);
}

// Issue 32: a limit on the tenant above the job's cgroup binds the job; the verdict names it with
// its level, and the incident names the limited device (as disk-slow names one: the loop device
// the job's files are on, the limited disk under it as physical), for alerts to route by.
TEST(CgroupVerdict, ALimitAboveTheJobsCgroupIsNamedWithItsLevelAndItsDevice) {
  const std::string limit =
      "io.max 254:0 (vda) rbps=15.0 MiB/s in /sys/fs/cgroup/tenant (parent of the job's cgroup)";
  model::JobSeries s = cgroupJob([&](model::JobSeries& j, size_t k, bool throttled) {
    j.steps[k] = throttled ? 1.0 : 10.0 + static_cast<double>(k % 3);
    j.io_some[k] = 0.01;
    j.cgroup_io_some[k] = throttled ? 0.9 : 0.02;
    j.cgroup_limited_read_bytes_per_s[k] = throttled ? 15.6e6 : 9e6;
    j.cgroup_read_limit_bytes_per_s[k] = 15728640;
    j.cgroup_read_limit[k] = limit;
    j.cgroup_limits[k] = limit;
  });
  model::addDevice(s, "loop0", "", true);
  model::addDevice(s, "vda", "loop0", true);
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& inc = a.incidents[0];
  EXPECT_EQ(inc.cls, model::StallClass::kIoThrottled);
  EXPECT_EQ(inc.device, "loop0");
  EXPECT_EQ(inc.physical_device, "vda");
  const auto named = std::find_if(inc.evidence.begin(), inc.evidence.end(), [&](const auto& e) {
    return e.signal == "job_cgroup_read_bytes_per_s at " + limit;
  });
  ASSERT_NE(named, inc.evidence.end());
  EXPECT_TRUE(named->supports);
}

// Threads waiting on I/O under pressure, no limit seen and no device past its threshold: the
// device whose latency rose the most is named (where the reads waited).
TEST(CgroupVerdict, AnIoThrottledStallWithoutALimitNamesTheDeviceThatRoseMost) {
  model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool throttled) {
    j.steps[k] = throttled ? 1.0 : 10.0;
    j.io_some[k] = throttled ? 0.8 : 0.01;
    j.d_state_threads[k] = throttled ? 6 : 0;
  });
  for (const char* name : {"loop0", "loop1"}) {
    model::DeviceSeries& d = model::addDevice(s, name, "", true);
    for (size_t k = 0; k < s.size(); ++k) {
      const bool in = k >= 40 && k < 60;
      d.r_await_ms[k] = std::string(name) == "loop0" ? (in ? 2.5 : 1.0) : 1.0;  // 2.5x: under 3x
      d.aqu_sz[k] = 0.5;
    }
  }
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_EQ(a.incidents[0].cls, model::StallClass::kIoThrottled);
  EXPECT_EQ(a.incidents[0].device, "loop0");
}

// A checkpoint to a second disk the job never reads, slowed by it: the disk is labelled as
// written by the job (not "does not read it"), and its latency against before is evidence that
// the checkpoint was slowed.
TEST(CgroupVerdict, ACheckpointSlowedByItsDeviceSaysSo) {
  model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool saving) {
    j.steps[k] = saving ? 0.0 : 10.0;
    j.write_bytes_per_s[k] = saving && k < 43 ? 600e6 : 1e6;
    j.io_some[k] = saving ? 0.5 : 0.01;
  });
  model::addDevice(s, "loop0", "", true);
  model::addDevice(s, "loop1", "", false);  // addDevice keeps them sorted: look them up after
  auto named = [&](const char* n) -> model::DeviceSeries& {
    return *std::find_if(s.devices.begin(), s.devices.end(),
                         [&](const auto& d) { return d.name == n; });
  };
  model::DeviceSeries& loop0 = named("loop0");
  model::DeviceSeries& loop1 = named("loop1");
  for (size_t k = 0; k < s.size(); ++k) {
    const bool in = k >= 40 && k < 60;
    loop0.r_await_ms[k] = 0.3;
    loop0.aqu_sz[k] = 0.5;
    loop1.w_await_ms[k] = in ? 428.0 : 1.0;
    loop1.aqu_sz[k] = in ? 30.0 : 0.1;
    loop1.write_bytes_per_s[k] = in && k < 45 ? 600e6 : (in ? 40e6 : 0.0);
  }
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& inc = a.incidents[0];
  EXPECT_EQ(inc.cls, model::StallClass::kCheckpoint);
  EXPECT_EQ(inc.device, "loop1");
  bool labelled = false, slowed = false, unread = false;
  for (const auto& e : inc.evidence) {
    labelled |= e.signal == "await_ms loop1 (the job writes it)";
    unread |= e.signal.find("loop1 (the job does not read it)") != std::string::npos;
    slowed |= e.signal == "checkpoint_slowed_by await_ms loop1" && e.supports && e.during > 400;
  }
  EXPECT_TRUE(labelled);
  EXPECT_FALSE(unread);
  EXPECT_TRUE(slowed);
}

// Issue 32: the workers stopped (T) while the main process waited: not idle (nothing is winding
// down), so not held live; the stopped processes and where the main process slept are named.
TEST(CgroupVerdict, AHangWithStoppedWorkersSaysSo) {
  model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool hung) {
    j.steps[k] = hung ? 0.0 : 10.0;
    j.workers_cpu[k] = hung ? 0.0 : 4.0;
    j.main_cpu[k] = hung ? 0.0 : 0.9;
    j.read_bytes_per_s[k] = hung ? 0.0 : 50e6;
    j.stopped_processes[k] = hung ? 12 : 0;
    j.sleep_wchan[k] = hung ? "poll_schedule_timeout" : "";
    j.io_some[k] = 0.0;
  });
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& inc = a.incidents[0];
  EXPECT_EQ(inc.cls, model::StallClass::kNotStorage);
  EXPECT_FALSE(processesIdle(s, inc));
  const auto stopped = std::find_if(inc.evidence.begin(), inc.evidence.end(), [](const auto& e) {
    return e.signal == "job_processes_stopped";
  });
  ASSERT_NE(stopped, inc.evidence.end());
  EXPECT_TRUE(stopped->supports);
  EXPECT_DOUBLE_EQ(stopped->during, 12);
  EXPECT_TRUE(std::any_of(inc.evidence.begin(), inc.evidence.end(), [](const auto& e) {
    return e.signal.starts_with("main_process_asleep in poll_schedule_timeout") && e.during == 1.0;
  }));
}

// Issue 36: a job without workers whose main process computes flat out is not idle.
TEST(CgroupVerdict, AMainProcessAtFullCpuIsNotIdle) {
  model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool slow) {
    j.steps[k] = slow ? 1.0 : 10.0;
    j.workers_cpu[k] = 0.0;
    j.main_cpu[k] = 1.0;
    j.read_bytes_per_s[k] = 0.0;
  });
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  EXPECT_FALSE(processesIdle(s, a.incidents[0]));
}

// Two ranks sharing one GPU, no hook: both GPUs' readings fall alike, but only rank 1's cgroup
// reads at its io.max limit with its threads in D: rank 1 is the straggler, not "starved alike".
TEST(CgroupVerdict, AStragglerIsNamedByItsOwnEvidenceWithoutTheHook) {
  model::JobSeries s = cgroupJob([](model::JobSeries& j, size_t k, bool throttled) {
    j.gpu_util_percent[k] = throttled ? 5.0 : 60.0 + static_cast<double>(k % 4);
    j.io_some[k] = throttled ? 0.6 : 0.01;
    j.d_state_threads[k] = throttled ? 8 : 0;
  });
  s.gpu_count = 1;
  for (int32_t r : {0, 1}) {
    model::RankSeries& rank = model::addRank(s, r);
    rank.pid = 100 + static_cast<uint32_t>(r);
    for (size_t k = 0; k < s.size(); ++k) {
      const bool in = k >= 40 && k < 60;
      rank.gpu_util_percent[k] = *s.gpu_util_percent[k];  // one GPU shared: alike
      rank.d_state_threads[k] = r == 1 && in ? 8 : 0;
      rank.read_bytes_per_s[k] = r == 1 ? (in ? 15e6 : 60e6) : (in ? 0.0 : 60e6);
      if (r == 1) {
        rank.cgroup_read_limit_bytes_per_s[k] = 15728640;
        rank.cgroup_limited_read_bytes_per_s[k] = in ? 15.5e6 : 2e6;
      }
    }
  }
  const Analysis a = analyzeJob(s);
  ASSERT_EQ(a.incidents.size(), 1u);
  const auto& inc = a.incidents[0];
  ASSERT_TRUE(inc.straggler) << rankSummary(inc);
  EXPECT_EQ(inc.straggler->rank, 1);
  EXPECT_EQ(inc.waiting_ranks, std::vector<int32_t>{0});
}

}  // namespace
}  // namespace stallwatch::correlator
