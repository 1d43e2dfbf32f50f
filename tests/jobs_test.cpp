#include "collectors/jobs/jobs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "collectors/jobs/kubernetes_pod.h"
#include "collectors/proc_file.h"
#include "fake_gpu_driver.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

namespace fs = std::filesystem;

// A /proc tree the test writes: torchrun (100) with two GPU ranks (101, 102) of run "run7",
// a dataloader worker (103) of rank 0 reading a file on loop1 and stuck in D state, an
// unrelated GPU process (200) and a process that is no job's (300).
class ProcTree {
 public:
  explicit ProcTree(const fs::path& root) : proc_(root / "proc") {}

  void process(uint32_t pid, const std::string& comm, char state, uint32_t ppid, uint64_t cpu_ticks,
               const std::string& environ = {}) {
    const fs::path dir = proc_ / std::to_string(pid);
    std::string stat = std::to_string(pid) + " (" + comm + ") " + state + " " +
                       std::to_string(ppid) + " 0 0 0 0 0 0 0 0 0 " + std::to_string(cpu_ticks) +
                       " 0 0 0 20 0 1 0 " + std::to_string(1000 + pid) +
                       " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    testing::writeFile(dir / "stat", stat);
    testing::writeFile(dir / "comm", comm + "\n");
    testing::writeFile(dir / "task" / std::to_string(pid) / "stat", stat);
    testing::writeFile(dir / "environ", environ);
    testing::writeFile(dir / "cmdline", std::string("python3\0train.py\0", 17));
    io(pid, 0);
    children(pid, {});
  }
  void io(uint32_t pid, uint64_t read_bytes) {
    testing::writeFile(
        proc_ / std::to_string(pid) / "io",
        "rchar: " + std::to_string(read_bytes) + "\nwchar: 0\nsyscr: 1\nsyscw: 0\nread_bytes: " +
            std::to_string(read_bytes) + "\nwrite_bytes: 0\ncancelled_write_bytes: 0\n");
  }
  void children(uint32_t pid, const std::string& list) {
    testing::writeFile(proc_ / std::to_string(pid) / "task" / std::to_string(pid) / "children",
                       list);
  }
  void wchan(uint32_t pid, const std::string& where) {
    testing::writeFile(proc_ / std::to_string(pid) / "task" / std::to_string(pid) / "wchan", where);
  }
  void openFile(uint32_t pid, int fd, const std::string& target) {
    fs::create_directories(proc_ / std::to_string(pid) / "fd");
    fs::create_symlink(target, proc_ / std::to_string(pid) / "fd" / std::to_string(fd));
  }
  void mountinfo(uint32_t pid, const std::string& text) {
    testing::writeFile(proc_ / std::to_string(pid) / "mountinfo", text);
  }
  void remove(uint32_t pid) { fs::remove_all(proc_ / std::to_string(pid)); }
  // The main thread's schedstat: ns on a CPU, ns runnable and waiting, timeslices.
  void schedstat(uint32_t pid, uint64_t run_ns, uint64_t wait_ns) {
    testing::writeFile(proc_ / std::to_string(pid) / "task" / std::to_string(pid) / "schedstat",
                       std::to_string(run_ns) + " " + std::to_string(wait_ns) + " 7\n");
  }

 private:
  fs::path proc_;
};

std::shared_ptr<const DeviceTree> loopOverVda() {
  auto tree = std::make_shared<DeviceTree>();
  BlockDevice vda;
  vda.name = "vda";
  vda.major = 254;
  vda.minor = 0;
  BlockDevice loop1;
  loop1.name = "loop1";
  loop1.kind = BlockKind::kLoop;
  loop1.major = 7;
  loop1.minor = 1;
  loop1.backing_device = "vda";
  tree->devices = {vda, loop1};
  return tree;
}

const JobSample* sampleOf(const SampleBatch& b, const std::string& key) {
  for (const auto& s : b.jobs) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

TEST(JobKey, FromEnvironment) {
  EXPECT_EQ(jobKeyFromEnvironment({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}}), "slurm:77.0");
  EXPECT_EQ(jobKeyFromEnvironment({{"TORCHELASTIC_RUN_ID", "abc"}}), "torchelastic:abc");
  EXPECT_EQ(jobKeyFromEnvironment({{"SLURM_JOB_ID", "5"}, {"TORCHELASTIC_RUN_ID", "abc"}}),
            "slurm:5");
  EXPECT_EQ(jobKeyFromEnvironment({{"HOME", "/root"}}), "");
  // torch.distributed without torchrun: the rendezvous the ranks share.
  EXPECT_EQ(jobKeyFromEnvironment({{"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}}),
            "dist:10.1.2.3:29500");
  EXPECT_EQ(jobKeyFromEnvironment({{"MASTER_ADDR", "10.1.2.3"}}), "");
}

TEST(JobKey, SlurmCgroupConfirmsOnlyItsOwnJob) {
  const std::string v2 = "/system.slice/slurmstepd.scope/job_77/step_0/user/task_0";
  EXPECT_TRUE(slurmCgroupConfirms("slurm:77.0", v2));
  EXPECT_TRUE(slurmCgroupConfirms("slurm:77", "/slurm/uid_1000/job_77"));
  EXPECT_FALSE(slurmCgroupConfirms("slurm:7", v2));  // job_7 is not job_77
  EXPECT_FALSE(slurmCgroupConfirms("slurm:77", "/user.slice/user-1001.slice/session-3.scope"));
  EXPECT_FALSE(slurmCgroupConfirms("torchelastic:job_77", v2));
  EXPECT_FALSE(slurmCgroupConfirms("slurm:77", std::nullopt));
}

class JobTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    placeProcesses();
    makeTracker();
  }

  // The /proc tree described above.
  void placeProcesses() {
    const std::string run7("TORCHELASTIC_RUN_ID=run7\0RANK=0\0", 32);
    const std::string run7_rank1("TORCHELASTIC_RUN_ID=run7\0RANK=1\0", 32);
    tree_.process(1, "init", 'S', 0, 0);
    tree_.process(100, "torchrun", 'S', 1, 10, std::string("TORCHELASTIC_RUN_ID=run7\0", 25));
    tree_.process(101, "python3", 'R', 100, 100, run7);
    tree_.process(102, "python3", 'R', 100, 100, run7_rank1);
    tree_.process(103, "pt_data_worker", 'D', 101, 50);
    tree_.wchan(103, "io_schedule");
    tree_.children(101, "103");
    tree_.process(200, "python3", 'R', 1, 10);
    tree_.process(300, "bash", 'S', 1, 10);
    tree_.openFile(103, 3, "/data/train/0001.bin");
    tree_.openFile(103, 4, "socket:[1234]");
    tree_.mountinfo(
        101, "1 0 254:0 / / rw - ext4 /dev/vda rw\n2 1 7:1 / /data rw - ext4 /dev/loop1 rw\n");
  }

  // Two GPUs: the ranks of run7 on GPU-0 (101, with 200 beside it) and GPU-1 (102).
  void makeTracker(std::vector<std::string> only_gpus = {}, size_t max_jobs = 256,
                   size_t open_files_per_discovery = 1024, uint32_t discovery_every_ticks = 1) {
    auto driver = std::make_unique<testing::FakeGpuDriver>();
    testing::FakeGpuDriver::Gpu g0, g1;
    g0.info = {0, "GPU-0", "Fake", {}};
    g0.compute_processes = {{101, 1ull << 30}, {200, std::nullopt}};
    g1.info = {1, "GPU-1", "Fake", {}};
    g1.compute_processes = {{102, 1ull << 30}};
    driver->gpus = {g0, g1};
    driver_ = driver.get();
    JobTrackerOptions options;
    options.listen_dataloader = false;
    options.discovery_every_ticks = discovery_every_ticks;
    options.only_gpus = std::move(only_gpus);
    options.max_jobs = max_jobs;
    options.open_files_per_discovery = open_files_per_discovery;
    options.wait_sample_hz = 0;  // a fixture tree: no live sampling
    tracker_ =
        std::make_unique<JobTracker>(SystemRoot::under(dir_.path()), options, std::move(driver));
    tracker_->setDeviceTree(loopOverVda());
  }

  // A cgroup v2 host whose ranks 101 and 102 sit in the cgroups RANK0 and RANK1 ("/job/rank0");
  // the cgroup mount's directory.
  fs::path placeRanksInCgroups(const std::string& rank0, const std::string& rank1) {
    const fs::path root = dir_.path();
    testing::writeFile(root / "proc/self/mountinfo",
                       "1 0 254:0 / / rw - ext4 /dev/vda rw\n"
                       "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    testing::writeFile(root / "proc/101/cgroup", "0::" + rank0 + "\n");
    testing::writeFile(root / "proc/102/cgroup", "0::" + rank1 + "\n");
    return root / "sys/fs/cgroup";
  }

  SampleBatch tick(int64_t second) {
    SampleBatch b;
    tracker_->collect({second * 1'000'000'000, second * 1000}, b);
    return b;
  }

  testing::ScratchDir dir_;
  ProcTree tree_{dir_.path()};
  std::unique_ptr<JobTracker> tracker_;
  testing::FakeGpuDriver* driver_ = nullptr;  // the tracker's
};

// --gpu 1: an agent for the job on GPU 1 finds it through that GPU only; pid 200, alone on
// GPU 0, is not its business.
TEST_F(JobTrackerTest, OnlyJobsOnTheSelectedGpusAreFound) {
  makeTracker({"1"});
  const SampleBatch first = tick(1);
  std::vector<std::string> keys;
  for (const auto& d : first.job_updates) keys.push_back(d.key);
  EXPECT_EQ(keys, std::vector<std::string>{"torchelastic:run7"});
  ASSERT_EQ(first.job_updates.size(), 1u);
  EXPECT_EQ(first.job_updates[0].gpus, std::vector<std::string>{"GPU-1"});
}

// A flood of processes, each a job of its own, is bounded: past max_jobs none is tracked, the
// ones tracked keep being sampled, and the refusals are said once and counted.
TEST_F(JobTrackerTest, JobsPastTheCapAreNotTrackedAndAreSaid) {
  makeTracker({}, 1);
  SampleBatch first;
  const CollectResult r = tracker_->collect({1'000'000'000, 1000}, first);
  EXPECT_EQ(tracker_->activeJobs(), 1u);
  EXPECT_EQ(first.job_updates.size(), 1u);
  SampleBatch second;
  const CollectResult next = tracker_->collect({2'000'000'000, 2000}, second);
  EXPECT_NE((r.notice + next.notice).find("more than 1 jobs at once"), std::string::npos)
      << r.notice << " / " << next.notice;
  EXPECT_EQ(second.jobs.size(), 1u);
  EXPECT_GT(r.refused + next.refused, 0u);  // counted for /metrics (issue 46)
}

// Each rank in a cgroup of its own, rank 1's with an io.max limit: the job's figures are rank
// 1's reads against its limit, and the limit is described with the device's name.
TEST_F(JobTrackerTest, ReadsTheJobsCgroupsAndNamesTheirLimits) {
  const fs::path cgroups = placeRanksInCgroups("/job/rank0", "/job/rank1");
  const fs::path rank1 = cgroups / "job/rank1";
  testing::writeFile(rank1 / "io.max", "254:0 rbps=4194304 wbps=max riops=max wiops=max\n");
  testing::writeFile(rank1 / "cpu.max", "max 100000\n");
  auto io_stat = [&](uint64_t mib) {
    testing::writeFile(rank1 / "io.stat", "254:0 rbytes=" + std::to_string(mib << 20) +
                                              " wbytes=0 rios=10 wios=0 dbytes=0 dios=0\n");
  };
  io_stat(0);
  testing::writeFile(cgroups / "job/rank0/io.stat", "254:0 rbytes=0 wbytes=0\n");
  makeTracker();
  const SampleBatch first = tick(1);
  io_stat(4);
  const SampleBatch second = tick(2);
  const JobSample* s = sampleOf(second, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_DOUBLE_EQ(s->cgroup_limited_read_bytes_per_second.value_or(-1), 4 << 20);
  EXPECT_DOUBLE_EQ(s->cgroup_read_limit_bytes_per_second.value_or(-1), 4194304);
  ASSERT_FALSE(first.job_updates.empty());
  EXPECT_EQ(first.job_updates.back().cgroup_limits,  // the job as described at the end of the tick
            "io.max 254:0 (vda) rbps=4.0 MiB/s in " + rank1.string());
  // Each rank's own: rank 1 at its limit, rank 0 without one.
  ASSERT_EQ(second.ranks.size(), 2u);
  for (const RankSample& r : second.ranks) {
    if (r.rank == 1) {
      EXPECT_DOUBLE_EQ(r.cgroup_limited_read_bytes_per_second.value_or(-1), 4 << 20);
      EXPECT_DOUBLE_EQ(r.cgroup_read_limit_bytes_per_second.value_or(-1), 4194304);
    } else {
      EXPECT_FALSE(r.cgroup_read_limit_bytes_per_second);
    }
  }
}

// Whether the job's cgroups have the io and memory controllers, from each one's
// cgroup.controllers: only with io does a request's bio name the job's cgroup, with memory its
// first page (the per-I/O collector's one-program modes).
TEST_F(JobTrackerTest, SaysWhetherEveryOneOfTheJobsCgroupsHasTheIoAndMemoryControllers) {
  const fs::path cg = placeRanksInCgroups("/job/rank0", "/job/rank1") / "job";
  testing::writeFile(cg / "rank0/cgroup.controllers", "cpuset cpu io memory pids\n");
  testing::writeFile(cg / "rank1/cgroup.controllers", "cpu io\n");
  makeTracker();
  const SampleBatch with_io = tick(1);
  const JobSample* s = sampleOf(with_io, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->cgroup_ids.size(), 2u);
  EXPECT_TRUE(s->cgroups_have_io);
  EXPECT_FALSE(s->cgroups_have_memory);  // rank1's parent did not enable it
  // One rank's parent enabled fewer controllers ("iocost" is not "io"): the job's bios may name
  // an ancestor.
  testing::writeFile(cg / "rank1/cgroup.controllers", "memory iocost\n");
  makeTracker();
  const SampleBatch without_io = tick(1);
  s = sampleOf(without_io, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->cgroups_have_io);
  EXPECT_TRUE(s->cgroups_have_memory);  // both name it: a request's first page names the rank
  // Their memory cgroups are themselves.
  EXPECT_EQ(s->memory_cgroup_ids, s->cgroup_ids);
}

// A hybrid host: the memory controller is cgroup v1's. A rank whose v1 memory cgroup mirrors its
// v2 cgroup (the same path, as systemd keeps them) is charged in a memory cgroup of its own; one
// in an ancestor's (shared with others) is not.
TEST_F(JobTrackerTest, OnAHybridHostTheMemoryCgroupsThatMirrorTheJobsAreItsOwn) {
  const fs::path root = dir_.path();
  testing::writeFile(root / "proc/self/mountinfo",
                     "1 0 254:0 / / rw - ext4 /dev/vda rw\n"
                     "30 1 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
                     "31 1 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                     "32 1 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
  const fs::path v2 = root / "sys/fs/cgroup/unified", v1 = root / "sys/fs/cgroup/memory";
  testing::writeFile(v2 / "job/rank0/cgroup.controllers", "\n");
  testing::writeFile(v2 / "job/rank1/cgroup.controllers", "\n");
  testing::writeFile(v1 / "job/rank0/memory.usage_in_bytes", "4096\n");
  testing::writeFile(v1 / "job/memory.usage_in_bytes", "8192\n");
  testing::writeFile(root / "proc/101/cgroup",
                     "5:cpu,cpuacct:/job\n4:memory:/job/rank0\n0::/job/rank0\n");
  testing::writeFile(root / "proc/102/cgroup",
                     "5:cpu,cpuacct:/job\n4:memory:/job\n0::/job/rank1\n");
  makeTracker();
  const SampleBatch shared = tick(1);
  const JobSample* s = sampleOf(shared, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->cgroup_ids.size(), 2u);
  EXPECT_FALSE(s->cgroups_have_io);
  EXPECT_FALSE(s->cgroups_have_memory);  // rank1 is charged in /job, which others may share
  testing::writeFile(v1 / "job/rank1/memory.usage_in_bytes", "4096\n");
  testing::writeFile(root / "proc/102/cgroup",
                     "5:cpu,cpuacct:/job\n4:memory:/job/rank1\n0::/job/rank1\n");
  makeTracker();
  const SampleBatch mirrored = tick(1);
  s = sampleOf(mirrored, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->cgroups_have_memory);
  // The v1 directories' ids, not the v2 ones.
  struct stat st {};
  std::vector<uint64_t> expected;
  for (const char* rank : {"job/rank0", "job/rank1"}) {
    ASSERT_EQ(::stat((v1 / rank).c_str(), &st), 0);
    expected.push_back(st.st_ino);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(s->memory_cgroup_ids, expected);
}

TEST(CgroupV1Path, FindsTheHierarchyThatHoldsTheController) {
  const std::string text =
      "12:cpu,cpuacct:/a\n4:memory:/user.slice/x.scope\n1:name=systemd:/u\n0::/v2\n";
  EXPECT_EQ(cgroupV1Path(text, "memory").value_or("-"), "/user.slice/x.scope");
  EXPECT_EQ(cgroupV1Path(text, "cpuacct").value_or("-"), "/a");
  EXPECT_FALSE(cgroupV1Path(text, "mem"));
  EXPECT_FALSE(cgroupV1Path("0::/only-v2\n", "memory"));
  EXPECT_FALSE(cgroupV1Path("4:memory\n4:memory:\n::\n", "memory"));  // malformed: skipped
}

// Issue 47: who else reads the job's devices is read from the leaf cgroups only while a job is
// followed (a host's tree is walked for nobody otherwise), and a job found again after a gap is
// judged from its own walks: its first names no cgroup, its second the rate over one second,
// never a rate against a reading from before the gap.
TEST_F(JobTrackerTest, TheNeighboursCgroupsAreWalkedOnlyWhileAJobIsFollowed) {
  const fs::path cgroups = placeRanksInCgroups("/job/rank0", "/job/rank1");
  testing::writeFile(cgroups / "job/rank0/io.stat", "254:0 rbytes=0 wbytes=0\n");
  testing::writeFile(cgroups / "job/rank1/io.stat", "254:0 rbytes=0 wbytes=0\n");
  auto backup_read = [&](uint64_t mib) {
    testing::writeFile(cgroups / "backup/io.stat",
                       "254:0 rbytes=" + std::to_string(mib << 20) + " wbytes=0\n");
  };
  auto named = [&](const SampleBatch& b) -> std::vector<DeviceUser> {
    const JobSample* s = sampleOf(b, "torchelastic:run7");
    return s && s->neighbour_io ? parseDeviceUsers(*s->neighbour_io) : std::vector<DeviceUser>{};
  };
  auto backup = [](const std::vector<DeviceUser>& users) -> std::optional<double> {
    for (const DeviceUser& u : users)
      if (u.cgroup == "/backup" && u.device == "vda") return u.read_bytes_per_second;
    return std::nullopt;
  };
  backup_read(0);
  makeTracker();
  tick(1);
  backup_read(10);
  EXPECT_EQ(backup(named(tick(2))), 10 << 20);
  // Every GPU process ends: no job is left to follow.
  const auto gpus = driver_->gpus;
  for (auto& g : driver_->gpus) g.compute_processes.clear();
  for (uint32_t pid : {100u, 101u, 102u, 103u, 200u}) tree_.remove(pid);
  tick(3);
  for (int64_t second = 4; second <= 8; ++second) {
    backup_read(10 + 20 * static_cast<uint64_t>(second - 3));
    EXPECT_TRUE(tick(second).jobs.empty());
  }
  // The job again (the same processes), the backup still reading 10 MiB/s.
  placeProcesses();
  driver_->gpus = gpus;
  backup_read(120);
  EXPECT_EQ(backup(named(tick(9))), std::nullopt);
  backup_read(130);
  EXPECT_EQ(backup(named(tick(10))), 10 << 20);
}

// A limit set above the job's cgroup (a tenant's, as a Kubernetes pod or a slice sets it) binds
// the job as much as its own: it is read, named with its level, and the job's reads are judged
// against it through the tenant's io.stat, which sums every cgroup below it.
TEST_F(JobTrackerTest, ALimitAboveTheJobsCgroupIsNamedWithItsLevel) {
  const fs::path root = dir_.path();
  const fs::path tenant = placeRanksInCgroups("/tenant/job", "/tenant/job") / "tenant";
  testing::writeFile(root / "proc/101/status", "Name:\tpython3\nCpus_allowed_list:\t0-7\n");
  testing::writeFile(tenant / "io.max", "254:0 rbps=15728640 wbps=max riops=max wiops=max\n");
  testing::writeFile(tenant / "cpu.max", "400000 100000\n");
  testing::writeFile(tenant / "memory.high", "8589934592\n");
  testing::writeFile(tenant / "job/io.stat", "254:0 rbytes=0 wbytes=0\n");
  auto io_stat = [&](uint64_t mib) {
    testing::writeFile(tenant / "io.stat", "254:0 rbytes=" + std::to_string(mib << 20) +
                                               " wbytes=0 rios=10 wios=0 dbytes=0 dios=0\n");
  };
  io_stat(0);
  makeTracker();
  const SampleBatch first = tick(1);
  io_stat(15);
  const SampleBatch second = tick(2);
  const JobSample* s = sampleOf(second, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_DOUBLE_EQ(s->cgroup_limited_read_bytes_per_second.value_or(-1), 15 << 20);
  EXPECT_DOUBLE_EQ(s->cgroup_read_limit_bytes_per_second.value_or(-1), 15728640);
  EXPECT_EQ(s->cgroup_read_limit, "io.max 254:0 (vda) rbps=15.0 MiB/s in " + tenant.string() +
                                      " (parent of the job's cgroup)");
  // Its affinity (8 CPUs) within the tenant's quota (4 CPUs).
  EXPECT_DOUBLE_EQ(s->cpus_allowed.value_or(-1), 4.0);
  ASSERT_FALSE(first.job_updates.empty());
  const std::string limits = first.job_updates.back().cgroup_limits;
  EXPECT_NE(limits.find("cpu.max 400000 100000 (4.00 CPU) in " + tenant.string() +
                        " (parent of the job's cgroup)"),
            std::string::npos)
      << limits;
  EXPECT_NE(limits.find("memory.high 8.0 GiB in " + tenant.string()), std::string::npos) << limits;
}

// A read limit set on the parent between discovery ticks is news at the next tick: the parent's
// io.max is read every tick (its other limits once a discovery period).
TEST_F(JobTrackerTest, AParentsReadLimitIsSeenAtTheNextTick) {
  const fs::path tenant = placeRanksInCgroups("/tenant/job", "/tenant/job") / "tenant";
  testing::writeFile(tenant / "io.max", "");
  testing::writeFile(tenant / "io.stat", "254:0 rbytes=0 wbytes=0 rios=0 wios=0\n");
  testing::writeFile(tenant / "job/io.stat", "254:0 rbytes=0 wbytes=0\n");
  makeTracker({}, 256, 1024, /*discovery_every_ticks=*/5);
  tick(1);  // a discovery tick: no limit anywhere
  testing::writeFile(tenant / "io.max", "254:0 rbps=15728640 wbps=max riops=max wiops=max\n");
  const std::string limit =
      "io.max 254:0 (vda) rbps=15.0 MiB/s in " + tenant.string() + " (parent of the job's cgroup)";
  const SampleBatch second = tick(2);  // not a discovery tick: the limit is in force
  const JobSample* s = sampleOf(second, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->cgroup_limits, limit);
  // The reads against it from the next reading of the parent's io.stat on.
  testing::writeFile(tenant / "io.stat",
                     "254:0 rbytes=" + std::to_string(15ull << 20) + " wbytes=0 rios=9 wios=0\n");
  const SampleBatch third = tick(3);
  s = sampleOf(third, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->cgroup_read_limit, limit);
  EXPECT_DOUBLE_EQ(s->cgroup_limited_read_bytes_per_second.value_or(-1), 15 << 20);
}

// The main thread's CPU and its wait for a CPU come from its schedstat, per interval; a job of
// several ranks gives the least busy of its main threads (the one a synchronous job waits for).
// Stopped processes (T) are counted per job and per rank.
TEST_F(JobTrackerTest, MainThreadCpuAndStoppedProcesses) {
  tree_.schedstat(101, 1'000'000'000, 0);
  tree_.schedstat(102, 1'000'000'000, 0);
  tick(1);
  tree_.schedstat(101, 1'900'000'000, 50'000'000);  // ran 0.9 s of the second
  tree_.schedstat(102, 1'300'000'000, 0);           // ran 0.3 s: asleep, waiting for a batch
  tree_.process(103, "pt_data_worker", 'T', 101, 50);
  const SampleBatch second = tick(2);
  const JobSample* s = sampleOf(second, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->main_thread_cpu_ratio.value_or(-1), 0.3, 1e-9);
  EXPECT_NEAR(s->main_thread_runqueue_ratio.value_or(-1), 0.0, 1e-9);
  EXPECT_EQ(s->stopped_processes, 1u);
  ASSERT_EQ(second.ranks.size(), 2u);
  for (const RankSample& r : second.ranks) {
    EXPECT_NEAR(r.main_thread_cpu_ratio.value_or(-1), r.rank == 0 ? 0.9 : 0.3, 1e-9);
    EXPECT_EQ(r.stopped_processes, r.rank == 0 ? 1u : 0u);
  }
}

TEST_F(JobTrackerTest, GroupsRanksByRunIdAndFollowsWorkers) {
  const SampleBatch first = tick(1);
  ASSERT_EQ(tracker_->activeJobs(), 2u);
  std::map<std::string, JobDescription> jobs;
  for (const auto& d : first.job_updates) jobs[d.key] = d;
  ASSERT_EQ(jobs.count("torchelastic:run7"), 1u);
  EXPECT_EQ(jobs["torchelastic:run7"].gpus, (std::vector<std::string>{"GPU-0", "GPU-1"}));
  EXPECT_EQ(jobs["torchelastic:run7"].labels, "TORCHELASTIC_RUN_ID=run7,RANK=0");
  EXPECT_EQ(jobs["torchelastic:run7"].label, "python3 train.py");
  ASSERT_EQ(jobs.count("pid:200:1200"), 1u);  // no job label: keyed by pid and start time
  const JobSample* s = sampleOf(first, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->processes, 3u);
  EXPECT_EQ(s->workers, 1u);
  EXPECT_EQ(s->d_state_threads, 1u);
  EXPECT_EQ(s->top_wchan, "io_schedule");
  size_t workers = 0;
  for (const auto& p : first.job_processes)
    workers += p.key == "torchelastic:run7" && p.role == "worker";
  EXPECT_EQ(workers, 1u);
}

// A worker forked by a thread other than the rank's main one (a launcher thread, a thread
// pool's) shows only in that thread's task/TID/children: found on a discovery tick.
TEST_F(JobTrackerTest, FollowsChildrenOfEveryThreadThatRan) {
  testing::writeFile(dir_.path() / "proc" / "102" / "task" / "1021" / "stat",
                     "1021 (pool) S 100 0 0 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 1102\n");
  testing::writeFile(dir_.path() / "proc" / "102" / "task" / "1021" / "children", "104 ");
  tree_.process(104, "pt_data_worker", 'S', 102, 5);
  const SampleBatch first = tick(1);
  const JobSample* s = sampleOf(first, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->processes, 4u);
  std::set<uint32_t> workers;
  for (const auto& p : first.job_processes) {
    if (p.key == "torchelastic:run7" && p.role == "worker") workers.insert(p.pid);
  }
  EXPECT_EQ(workers, (std::set<uint32_t>{103, 104}));
}

TEST_F(JobTrackerTest, EachRankIsAUnitWithItsWorkersAndItsGpu) {
  tick(1);
  tree_.process(103, "pt_data_worker", 'D', 101, 150);  // rank 0's worker: no RANK of its own
  tree_.wchan(103, "io_schedule");
  tree_.io(103, 50'000'000);
  tree_.io(102, 8'000'000);
  const SampleBatch b = tick(3);
  std::map<int32_t, const RankSample*> ranks;
  for (const auto& r : b.ranks) {
    if (r.key == "torchelastic:run7") ranks[r.rank] = &r;
  }
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0]->processes, 2u);
  EXPECT_EQ(ranks[0]->workers, 1u);
  EXPECT_EQ(ranks[0]->d_state_threads, 1u);
  EXPECT_EQ(ranks[0]->top_wchan, "io_schedule");
  EXPECT_EQ(ranks[0]->gpu, "GPU-0");
  ASSERT_TRUE(ranks[0]->read_bytes_per_second);
  EXPECT_DOUBLE_EQ(*ranks[0]->read_bytes_per_second, 25'000'000.0);
  EXPECT_EQ(ranks[1]->processes, 1u);
  EXPECT_EQ(ranks[1]->workers, 0u);
  EXPECT_EQ(ranks[1]->gpu, "GPU-1");
  ASSERT_TRUE(ranks[1]->read_bytes_per_second);
  EXPECT_DOUBLE_EQ(*ranks[1]->read_bytes_per_second, 4'000'000.0);
  // The one-process job on GPU 0 has no rank rows of its own.
  for (const auto& r : b.ranks) EXPECT_EQ(r.key, "torchelastic:run7");
}

TEST_F(JobTrackerTest, RanksAreDescribedOnceWithTheirMainProcessAndGpu) {
  const SampleBatch first = tick(1);
  std::map<int32_t, RankDescription> described;
  for (const auto& r : first.rank_updates) {
    if (r.key == "torchelastic:run7") described[r.rank] = r;
  }
  ASSERT_EQ(described.size(), 2u);
  EXPECT_EQ(described[0].pid, 101u);
  EXPECT_EQ(described[0].gpu, "GPU-0");
  EXPECT_EQ(described[1].pid, 102u);
  EXPECT_EQ(described[1].gpu, "GPU-1");
  EXPECT_TRUE(tick(2).rank_updates.empty());
}

TEST_F(JobTrackerTest, NamesTheDeviceAFileIsOnAndTheDiskUnderIt) {
  const SampleBatch first = tick(1);
  std::vector<std::pair<std::string, std::string>> devices;
  for (const auto& d : first.job_devices) {
    if (d.key == "torchelastic:run7") devices.emplace_back(d.device, d.via);
  }
  EXPECT_EQ(devices,
            (std::vector<std::pair<std::string, std::string>>{{"loop1", ""}, {"vda", "loop1"}}));
}

// One descriptor per discovery tick: one member looked at per tick, the longest unseen first,
// and what each was found to hold is kept until its next look.
TEST_F(JobTrackerTest, OpenFilesAreLookedAtWithinABudgetAndKept) {
  makeTracker({}, 256, 1);
  auto devices_at = [&](int64_t second) {
    std::vector<std::string> devices;
    for (const auto& d : tick(second).job_devices) {
      if (d.key == "torchelastic:run7") devices.push_back(d.device);
    }
    return devices;
  };
  // Members in key order: 200 (its own job), then run7's 101, 102 and the worker 103.
  EXPECT_TRUE(devices_at(1).empty());
  EXPECT_TRUE(devices_at(2).empty());
  EXPECT_TRUE(devices_at(3).empty());
  const std::vector<std::string> loop1_over_vda{"loop1", "vda"};
  EXPECT_EQ(devices_at(4), loop1_over_vda);  // 103's turn
  EXPECT_EQ(devices_at(5), loop1_over_vda);  // 200 looked at again; 103's files kept
}

// Issue 16: where cgroups cannot tell the users of a device apart (here there are none), the
// processes reading the job's device are named, grouped by command, once the device moved more
// than the job did; a busy process with no file on the job's devices is not named there.
TEST_F(JobTrackerTest, ProcessesReadingTheJobsDeviceAreNamedWhereCgroupsCannotTell) {
  const std::string mounts =
      "1 0 254:0 / / rw - ext4 /dev/vda rw\n2 1 7:1 / /data rw - ext4 /dev/loop1 rw\n"
      "3 1 8:0 / /other rw - ext4 /dev/sda rw\n";
  for (uint32_t pid : {400u, 401u, 500u}) {
    tree_.process(pid, pid == 500 ? "backup" : "dd", 'R', 1, 10);
    tree_.mountinfo(pid, mounts);
  }
  tree_.openFile(400, 3, "/data/neighbour.bin");
  tree_.openFile(401, 3, "/data/neighbour.bin");
  tree_.openFile(500, 3, "/other/archive.tar");
  auto at = [&](int64_t second, double loop1_bytes_per_s) {
    SampleBatch b;
    DiskSample loop1;
    loop1.device = "loop1";
    loop1.major = 7;
    loop1.minor = 1;
    loop1.rates.read_bytes_per_second = loop1_bytes_per_s;
    b.disks.push_back(loop1);
    tracker_->collect({second * 1'000'000'000, second * 1000}, b);
    const JobSample* s = sampleOf(b, "torchelastic:run7");
    return s ? s->neighbour_io : std::optional<std::string>("no sample");
  };
  tree_.io(400, 1'000'000'000);
  tree_.io(500, 5'000'000'000);
  EXPECT_EQ(at(1, 150e6), "");   // the first walk: no rates yet
  tree_.io(400, 1'100'000'000);  // 100 MB in the second
  tree_.io(401, 50'000'000);     // started since: all its bytes count
  tree_.io(500, 5'400'000'000);  // 400 MB/s, elsewhere
  const auto named = parseDeviceUsers(at(2, 150e6).value_or(""));
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].device, "loop1");
  EXPECT_EQ(named[0].cgroup, "process dd");
  EXPECT_DOUBLE_EQ(named[0].read_bytes_per_second, 150e6);
  // The job's device accounted for by the job itself: no walk, nothing said.
  tree_.io(103, 150'000'000);
  EXPECT_EQ(at(3, 1e6), std::nullopt);
}

TEST(ProcessNeighbours, BusiestCommandsBetweenTwoWalks) {
  const std::map<uint32_t, ProcessIoReading> before{
      {10, {"dd", 1000, 0}}, {11, {"dd", 0, 0}}, {12, {"python3", 5000, 0}}, {13, {"tar", 900, 0}}};
  const std::map<uint32_t, ProcessIoReading> after{
      {10, {"dd", 3000, 0}},         // +2000
      {14, {"dd", 500, 0}},          // new since: all of it
      {12, {"python3", 5100, 100}},  // +100 read, +100 written
      {13, {"rsync", 100, 0}},       // pid reused by another command: nothing
  };
  const auto busiest = busiestCommands(before, after, 2.0, 3, 0);
  ASSERT_EQ(busiest.size(), 2u);
  EXPECT_EQ(busiest[0].comm, "dd");
  EXPECT_DOUBLE_EQ(busiest[0].read_bytes_per_second, 1250);
  EXPECT_EQ(busiest[0].pids, (std::vector<uint32_t>{10, 14}));
  EXPECT_EQ(busiest[1].comm, "python3");
  EXPECT_DOUBLE_EQ(busiest[1].bytes_per_second(), 100);
  EXPECT_EQ(busiestCommands(before, after, 2.0, 1, 0).size(), 1u);
  EXPECT_EQ(busiestCommands(before, after, 2.0, 3, 200).size(), 1u);
  EXPECT_TRUE(busiestCommands(before, after, 0, 3, 0).empty());
}

// A process in a Kubernetes pod with no run id: the pod (from its cgroup and the kubelet's
// log directory) names the job, and its namespace and name are labels.
TEST_F(JobTrackerTest, APodWithoutARunIdNamesItsJob) {
  const std::string kId = "77aa" + std::string(56, '0') + "beef";  // a container id: 64 hex digits
  testing::writeFile(dir_.path() / "proc" / "200" / "cgroup",
                     "0::/kubepods.slice/kubepods-burstable.slice/"
                     "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/"
                     "cri-containerd-" +
                         kId + ".scope\n");
  std::filesystem::create_directories(dir_.path() / "var" / "log" / "pods" /
                                      "ml-team_trainer-0_0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
  // The kubelet's links: the pod's two containers (a sidecar's id differs) and another pod's.
  const auto links = dir_.path() / "var" / "log" / "containers";
  testing::writeFile(links / ("trainer-0_ml-team_sidecar-" + std::string(64, '1') + ".log"), "");
  testing::writeFile(links / ("trainer-0_ml-team_pytorch-" + kId + ".log"), "");
  testing::writeFile(links / ("trainer-00_ml-team_other-" + kId + ".log"), "");
  std::filesystem::create_directories(dir_.path() / "var" / "log" / "pods" /
                                      "kube-system_coredns-1_11111111-2222-3333-4444-555555555555");
  makeTracker();
  std::map<std::string, JobDescription> jobs;
  for (const auto& d : tick(1).job_updates) jobs[d.key] = d;
  ASSERT_EQ(jobs.count("k8s:ml-team/trainer-0"), 1u) << jobs.begin()->first;
  EXPECT_EQ(jobs["k8s:ml-team/trainer-0"].labels, "K8S_NAMESPACE=ml-team,K8S_POD=trainer-0");
  EXPECT_EQ(jobs.count("torchelastic:run7"), 1u);  // a run id still names its job
  // The sample carries the pod, and the container its process runs in, for /metrics' labels.
  const SampleBatch b = tick(2);
  const JobSample* s = sampleOf(b, "k8s:ml-team/trainer-0");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->pod);
  EXPECT_EQ(s->pod->ns, "ml-team");
  EXPECT_EQ(s->pod->name, "trainer-0");
  EXPECT_EQ(s->pod->container, "pytorch");
  EXPECT_FALSE(sampleOf(b, "torchelastic:run7")->pod);
}

TEST(KubernetesPod, UidFromEitherCgroupDriverAndNoneOutsideKubepods) {
  EXPECT_EQ(podUidFromCgroup("/kubepods.slice/kubepods-besteffort.slice/"
                             "kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/"
                             "cri-containerd-77aa.scope"),
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(podUidFromCgroup("/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/77aa"),
            "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(podUidFromCgroup("/kubepods.slice/kubepods-burstable.slice"), std::nullopt);
  EXPECT_EQ(podUidFromCgroup("/system.slice/pod-manager.service"), std::nullopt);
  EXPECT_EQ(podUidFromCgroup("/user.slice/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"), std::nullopt);
  EXPECT_EQ(podUidFromCgroup("/kubepods/podnot-a-uid/77aa"), std::nullopt);
}

TEST(KubernetesPod, ContainerIdFromEachRuntimesScopeOrACgroupfsFolder) {
  const std::string id(64, 'a');
  const std::string pod = "/kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8a9b_0c1d2e3f4a5b.slice/";
  EXPECT_EQ(containerIdFromCgroup(pod + "cri-containerd-" + id + ".scope"), id);
  EXPECT_EQ(containerIdFromCgroup(pod + "crio-" + id + ".scope"), id);
  EXPECT_EQ(containerIdFromCgroup(pod + "docker-" + id + ".scope"), id);
  EXPECT_EQ(
      containerIdFromCgroup("/kubepods/burstable/pod0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b/" + id),
      id);
  EXPECT_EQ(containerIdFromCgroup(pod + "cri-containerd-77aa.scope"), std::nullopt);  // not an id
  EXPECT_EQ(containerIdFromCgroup("/system.slice/docker-" + id + ".scope"), std::nullopt);
  EXPECT_EQ(containerIdFromCgroup(pod), std::nullopt);
}

TEST_F(JobTrackerTest, RatesFromTheSecondTick) {
  tick(1);
  tree_.process(103, "pt_data_worker", 'D', 101, 150);  // +100 ticks of CPU in 2 s
  tree_.wchan(103, "io_schedule");
  tree_.io(103, 50'000'000);
  const SampleBatch second = tick(3);
  const JobSample* s = sampleOf(second, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->read_bytes_per_second);
  EXPECT_DOUBLE_EQ(*s->read_bytes_per_second, 25'000'000.0);
  ASSERT_TRUE(s->workers_cpu_ratio);
  EXPECT_NEAR(*s->workers_cpu_ratio, 100.0 / static_cast<double>(sysconf(_SC_CLK_TCK)) / 2.0, 1e-9);
}

// A reaped worker's lifetime I/O lands in its parent's counters: it must not count twice.
TEST_F(JobTrackerTest, AReapedWorkersIoIsNotCountedTwice) {
  tree_.io(101, 1'000);
  tree_.io(103, 5'000);
  tick(1);
  tree_.remove(103);             // the worker read 1000 more bytes, exited and was reaped:
  tree_.io(101, 1'000 + 6'000);  // its 6000 bytes now show in the parent's counters
  tree_.children(101, "");
  const SampleBatch b = tick(2);
  const JobSample* s = sampleOf(b, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->read_bytes_per_second);
  EXPECT_DOUBLE_EQ(*s->read_bytes_per_second, 1'000.0);
}

TEST_F(JobTrackerTest, AJobEndsWhenItsLastRootExits) {
  tick(1);
  tree_.remove(101);
  tick(2);
  EXPECT_EQ(tracker_->activeJobs(), 2u);  // rank 1 still runs
  tree_.remove(102);
  const SampleBatch b = tick(3);
  bool ended = false;
  for (const auto& d : b.job_updates) ended |= d.key == "torchelastic:run7" && d.ended_ms == 3000;
  EXPECT_TRUE(ended);
  EXPECT_EQ(tracker_->activeJobs(), 1u);
}

TEST_F(JobTrackerTest, PidReuseIsNotTheSameProcess) {
  tick(1);
  tree_.process(103, "other", 'S', 101, 0);  // same pid, new start time below
  testing::writeFile(
      dir_.path() / "proc/103/stat",
      "103 (other) S 101 0 0 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 999999 0 0 0 0 0 0 0 0 0 "
      "0 0 0 0 0 0 0 0 0 0 0 0 0\n");
  tree_.children(101, "");
  const SampleBatch b = tick(2);
  const JobSample* s = sampleOf(b, "torchelastic:run7");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->workers, 0u);
}

// Issue 18: on the live /proc, a member whose count of open descriptors has not moved is not
// read again (its files kept as last found) until open_files_reread_ticks have passed; a count
// that moved is read at once. A real child: three files in a scratch directory, then one of
// them turned into /dev/null in place (same count, one file fewer to count), then a fourth.
TEST(JobTrackerLive, OpenFilesAreReadAgainWhenTheirCountMovesOrTheyAreOld) {
  testing::ScratchDir dir;
  const auto mounts = readMountinfo(SystemRoot{});
  ASSERT_TRUE(mounts.has_value());
  const MountInfo* holder = nullptr;
  for (const auto& m : mounts->mounts) {
    if (pathIsUnder(dir.path().string(), m.mount_point) &&
        (!holder || m.mount_point.size() > holder->mount_point.size()))
      holder = &m;
  }
  ASSERT_NE(holder, nullptr);
  auto tree = std::make_shared<DeviceTree>();
  BlockDevice disk;
  disk.name = "scratchdisk";
  disk.major = holder->major;
  disk.minor = holder->minor;
  tree->devices.push_back(disk);

  int to_child[2];
  int from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<int> fds;
    for (const char* name : {"a", "b", "c"}) {
      fds.push_back(::open((dir.path() / name).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    }
    char step = 0;
    while (::write(from_child[1], "k", 1) == 1 && ::read(to_child[0], &step, 1) == 1) {
      if (step == 'n') {  // a becomes /dev/null in place: as many descriptors as before
        const int null = ::open("/dev/null", O_RDONLY);
        ::dup2(null, fds[0]);
        ::close(null);
      }
      if (step == 'd') fds.push_back(::open((dir.path() / "d").c_str(), O_CREAT | O_RDWR, 0600));
    }
    ::_exit(0);
  }
  char ack = 0;
  auto tell = [&](char step) {
    ASSERT_EQ(::write(to_child[1], &step, 1), 1);
    ASSERT_EQ(::read(from_child[0], &ack, 1), 1);
  };
  ASSERT_EQ(::read(from_child[0], &ack, 1), 1);

  JobTrackerOptions options;
  options.pids = {static_cast<uint32_t>(child)};
  options.follow_gpu_processes = false;
  options.listen_dataloader = false;
  options.discovery_every_ticks = 1;
  options.open_files_reread_ticks = 3;
  JobTracker tracker(SystemRoot{}, options, nullptr);
  tracker.setDeviceTree(tree);
  auto files_at = [&](int64_t second) -> int {
    SampleBatch b;
    tracker.collect({second * 1'000'000'000, second * 1000}, b);
    for (const auto& d : b.job_devices) {
      if (d.device == "scratchdisk") return static_cast<int>(d.open_files);
    }
    return -1;
  };
  const bool counted =
      ProcessReader("/proc").openFileCount(static_cast<uint32_t>(child)).has_value();
  // The child's three files, and whatever it inherited on that device (under ctest, one more).
  const int first = files_at(1);
  EXPECT_GE(first, 3);
  tell('n');
  if (!counted) {
    EXPECT_EQ(files_at(2), first - 1);  // a kernel before 6.2: every member read at every look
  } else {
    EXPECT_EQ(files_at(2), first);  // read at 1, same count since: kept
    EXPECT_EQ(files_at(3), first);
    EXPECT_EQ(files_at(4), first - 1);  // 3 ticks since that read: read again
    tell('d');
    EXPECT_EQ(files_at(5), first);  // the count moved: read at once
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace stallwatch::collectors
