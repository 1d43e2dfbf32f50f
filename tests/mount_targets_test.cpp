// Mounts that no block device serves, as storage targets: the mountstats parser on real
// captures and on each malformed shape, nfsiostat's arithmetic, the targets in the device
// tree (NFS, FUSE and its daemon, an overlay and the devices under its layers), and the
// collector on a root tree whose counters move.
#include "collectors/devices/mount_targets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "collectors/counter_rates.h"
#include "collectors/devices/block_devices.h"
#include "collectors/devices/mountstats.h"
#include "collectors/proc_file.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

using ::testing::ElementsAre;

std::string fixtureText(const std::string& relative) {
  auto text = readTextFile(testing::fixtures() / relative);
  EXPECT_TRUE(text) << relative;
  return text.value_or("");
}

// node_exporter's capture: three NFS mounts (NFSv4 over TCP twice, NFSv3 over UDP) among
// local ones, one of them with a counter the kernel printed as a wrapped negative number.
TEST(Mountstats, ParsesNodeExporterCapture) {
  const auto parsed = parseMountstats(fixtureText("procfs/node_exporter/proc/10/mountstats"));
  EXPECT_TRUE(parsed.skipped.empty()) << parsed.skipped.front().message;
  ASSERT_EQ(parsed.mounts.size(), 3u);
  const NfsMountStats& first = parsed.mounts[0];
  EXPECT_EQ(first.source, "192.168.1.1:/srv/test");
  EXPECT_EQ(first.mount_point, "/mnt/nfs/test");
  EXPECT_EQ(first.fs_type, "nfs4");
  EXPECT_EQ(first.statvers, "1.1");
  EXPECT_EQ(first.age_seconds, 13968u);
  EXPECT_EQ(first.transport, "tcp");
  ASSERT_EQ(first.ops.size(), 3u);
  const NfsOpCounters* read = first.op("READ");
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->ops, 1298u);
  EXPECT_EQ(read->transmissions, 1298u);
  EXPECT_EQ(read->bytes_sent, 207680u);
  EXPECT_EQ(read->bytes_received, 1210292152u);
  EXPECT_EQ(read->queue_ms, 6u);
  EXPECT_EQ(read->rtt_ms, 79386u);
  EXPECT_EQ(read->execute_ms, 79407u);
  EXPECT_FALSE(read->errors);  // 8 counters: a kernel before the errors column
  const NfsOpCounters* access = parsed.mounts[1].op("ACCESS");
  ASSERT_NE(access, nullptr);
  EXPECT_EQ(access->queue_ms, 18446743919241604546u);
  EXPECT_EQ(parsed.mounts[2].fs_type, "nfs");
  EXPECT_EQ(parsed.mounts[2].transport, "udp");
}

// prometheus/procfs' capture: one NFSv4 mount.
TEST(Mountstats, ParsesProcfsCapture) {
  const auto parsed =
      parseMountstats(fixtureText("procfs/prometheus-procfs/proc/26231/mountstats"));
  EXPECT_TRUE(parsed.skipped.empty());
  ASSERT_EQ(parsed.mounts.size(), 1u);
  EXPECT_EQ(parsed.mounts[0].mount_point, "/mnt/nfs/test");
  ASSERT_NE(parsed.mounts[0].op("ACCESS"), nullptr);
  EXPECT_EQ(parsed.mounts[0].op("ACCESS")->ops, 2927395007u);
}

struct MalformedCase {
  std::string name;
  std::string text;
  size_t mounts;   // NFS mounts still read
  size_t skipped;  // lines counted as skipped
};

class MountstatsMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MountstatsMalformed, SkipsAndCountsWithoutThrowing) {
  const auto parsed = parseMountstats(GetParam().text);
  EXPECT_EQ(parsed.mounts.size(), GetParam().mounts);
  EXPECT_EQ(parsed.skipped.size(), GetParam().skipped);
}

const std::string kHeader =
    "device 10.0.0.5:/export mounted on /data with fstype nfs4 statvers=1.1\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, MountstatsMalformed,
    ::testing::Values(
        MalformedCase{"empty", "", 0, 0}, MalformedCase{"not_mountstats", "hello\n", 0, 0},
        MalformedCase{"header_too_short", "device foo\n", 0, 1},
        MalformedCase{"header_wrong_words", "device a BAD on / with fstype x\n", 0, 1},
        MalformedCase{"statvers_missing_key", "device a mounted on / with fstype nfs 1.1\n", 0, 1},
        MalformedCase{"local_mount_only", "device /dev/sda1 mounted on / with fstype ext4\n", 0, 0},
        MalformedCase{"fuse_mount_ignored",
                      "device s3 mounted on /s3 with fstype fuse.s3fs statvers=1.1\n", 0, 0},
        MalformedCase{"header_alone", kHeader, 1, 0},
        MalformedCase{"bad_age", kHeader + "\tage:\tx\n", 1, 1},
        MalformedCase{"bad_transport", kHeader + "\txprt:\ttcpx 0 0\n", 1, 1},
        MalformedCase{"op_too_few", kHeader + "per-op statistics\n READ: 1 2 3\n", 1, 1},
        MalformedCase{"op_not_number", kHeader + "per-op statistics\n READ: 1 2 3 4 5 6 7 x\n", 1,
                      1},
        MalformedCase{"op_too_many", kHeader + "per-op statistics\n READ: 1 2 3 4 5 6 7 8 9 10\n",
                      1, 1},
        MalformedCase{"op_no_colon", kHeader + "per-op statistics\n READ 1 2 3 4 5 6 7 8\n", 1, 1},
        MalformedCase{"op_overflow",
                      kHeader + "per-op statistics\n READ: 99999999999999999999 2 3 4 5 6 7 8\n", 1,
                      1},
        MalformedCase{"errors_column", kHeader + "per-op statistics\n READ: 1 2 3 4 5 6 7 8 9\n", 1,
                      0},
        MalformedCase{"two_blocks_one_bad",
                      kHeader + "per-op statistics\n READ: 1\n\n" + kHeader +
                          "per-op statistics\n WRITE: 1 1 0 0 0 0 0 0\n",
                      2, 1}),
    testing::CaseName{});

NfsMountStats statsWith(uint64_t age, std::vector<NfsOpCounters> ops) {
  NfsMountStats m;
  m.mount_point = "/data";
  m.fs_type = "nfs4";
  m.age_seconds = age;
  m.ops = std::move(ops);
  return m;
}

// nfsiostat's arithmetic over two readings one second apart: 100 READs that took 850 ms of
// execute time (800 of them on the wire), 10 GETATTRs, 4 retransmissions, one timeout.
TEST(NfsRates, FollowNfsiostat) {
  const auto before = statsWith(100, {{"READ", 1000, 1000, 0, 0, 0, 0, 2000, 3000, {}},
                                      {"WRITE", 10, 10, 0, 0, 0, 0, 10, 20, {}},
                                      {"GETATTR", 50, 50, 0, 0, 0, 0, 50, 60, {}}});
  const auto after = statsWith(101, {{"READ", 1100, 1104, 1, 0, 104857600, 0, 2800, 3850, {}},
                                     {"WRITE", 10, 10, 0, 0, 0, 0, 10, 20, {}},
                                     {"GETATTR", 60, 60, 0, 0, 0, 0, 70, 90, {}}});
  const auto r = computeNfsRates(before, after, 1.0);
  ASSERT_TRUE(r.rates && r.nfs);
  EXPECT_DOUBLE_EQ(r.rates->reads_per_second, 100);
  EXPECT_DOUBLE_EQ(r.rates->read_bytes_per_second, 104857600);
  EXPECT_DOUBLE_EQ(*r.rates->r_await_ms, 8.5);
  EXPECT_FALSE(r.rates->w_await_ms);  // no WRITE completed
  EXPECT_DOUBLE_EQ(*r.nfs->read_rtt_ms, 8.0);
  EXPECT_DOUBLE_EQ(r.rates->aqu_sz, (850.0 + 30.0) / 1000.0);
  EXPECT_DOUBLE_EQ(r.nfs->metadata_ops_per_second, 10);
  EXPECT_DOUBLE_EQ(*r.nfs->metadata_await_ms, 3.0);
  EXPECT_DOUBLE_EQ(r.nfs->retransmissions_per_second, 4);
  EXPECT_DOUBLE_EQ(r.nfs->timeouts_per_second, 1);
}

TEST(NfsRates, AnOpThatWentBackwardsIsLeftOutAndARemountGivesNone) {
  const auto before = statsWith(100, {{"READ", 1000, 1000, 0, 0, 0, 0, 2000, 3000, {}}});
  const auto wrapped = statsWith(101, {{"READ", 900, 900, 0, 0, 0, 0, 1000, 1000, {}}});
  const auto r = computeNfsRates(before, wrapped, 1.0);
  ASSERT_TRUE(r.rates);
  EXPECT_FALSE(r.rates->r_await_ms);
  EXPECT_DOUBLE_EQ(r.rates->reads_per_second, 0);
  EXPECT_EQ(computeNfsRates(before, statsWith(5, {}), 1.0).gap, RateGap::kCounterReset);
  EXPECT_EQ(computeNfsRates(before, before, 0.0).gap, RateGap::kNoTimeElapsed);
}

MountInfo mount(uint32_t major, uint32_t minor, std::string point, std::string type,
                std::string source, std::string super_options = "rw") {
  MountInfo m;
  m.major = major;
  m.minor = minor;
  m.mount_point = std::move(point);
  m.fs_type = std::move(type);
  m.source = std::move(source);
  m.super_options = std::move(super_options);
  return m;
}

DeviceTree loopStack() {
  DeviceTree tree;
  BlockDevice vda;
  vda.name = "vda";
  vda.major = 254;
  vda.minor = 0;
  BlockDevice loop0;
  loop0.name = "loop0";
  loop0.kind = BlockKind::kLoop;
  loop0.major = 7;
  loop0.minor = 0;
  loop0.backing_file = "/srv/images/layers.img";
  tree.devices = {vda, loop0};
  return tree;
}

// A container's root: an overlay whose lower and upper directories are on the ext4 of loop0,
// whose image is on vda. The overlay is a target; under it, loop0 and then vda.
TEST(MountTargets, OverlayNamesTheDevicesUnderItsLayers) {
  DeviceTree tree = loopStack();
  attachMounts(tree, {mount(254, 0, "/", "ext4", "/dev/vda"),
                      mount(7, 0, "/mnt/layers", "ext4", "/dev/loop0"),
                      mount(0, 77, "/run/ctr/merged", "overlay", "overlay",
                            "rw,lowerdir=/mnt/layers/l2:/mnt/layers/l1,upperdir=/mnt/layers/up,"
                            "workdir=/mnt/layers/work"),
                      mount(0, 25, "/tmp", "tmpfs", "tmpfs")});
  const BlockDevice* overlay = tree.findByDevnum(0, 77);
  ASSERT_NE(overlay, nullptr);
  EXPECT_EQ(overlay->name, "/run/ctr/merged");
  EXPECT_EQ(overlay->kind, BlockKind::kOverlay);
  EXPECT_EQ(overlay->served_by, "overlay over loop0");
  EXPECT_THAT(tree.devicesBelow("/run/ctr/merged"), ElementsAre("loop0", "vda"));
  EXPECT_THAT(tree.physicalDevices("/run/ctr/merged"), ElementsAre("vda"));
  EXPECT_EQ(tree.findByDevnum(0, 25), nullptr);  // tmpfs is memory, never a disk
  // A rescan replaces the targets rather than adding them again.
  attachMounts(tree, {mount(0, 77, "/run/ctr/merged", "overlay", "overlay", "rw,lowerdir+=/x")});
  EXPECT_EQ(std::count_if(tree.devices.begin(), tree.devices.end(),
                          [](const BlockDevice& d) { return d.kind == BlockKind::kOverlay; }),
            1);
}

// A layer or a loop image on tmpfs is in memory: it is on no disk, not on the disk of "/".
TEST(MountTargets, WhatIsInMemoryIsOnNoDevice) {
  DeviceTree tree = loopStack();
  tree.devices[1].backing_file = "/dev/shm/images/layers.img";
  attachMounts(tree,
               {mount(254, 0, "/", "ext4", "/dev/vda"), mount(0, 25, "/dev/shm", "tmpfs", "tmpfs"),
                mount(7, 0, "/mnt/layers", "ext4", "/dev/loop0"),
                mount(0, 26, "/run/upper", "tmpfs", "tmpfs"),
                mount(0, 77, "/merged", "overlay", "overlay",
                      "rw,lowerdir=/mnt/layers/l1,upperdir=/run/upper/up,workdir=/run/upper/w")});
  EXPECT_EQ(tree.find("loop0")->backing_device, "");
  EXPECT_EQ(tree.find("/merged")->served_by, "overlay over loop0 (and layers in memory)");
  EXPECT_THAT(tree.devicesBelow("/merged"), ElementsAre("loop0"));
}

TEST(MountTargets, NfsIsNamedByItsServerAndABindMountJoinsItsTarget) {
  DeviceTree tree;
  attachMounts(tree, {mount(0, 42, "/mnt/nfs/test", "nfs4", "192.168.1.1:/srv/test"),
                      mount(0, 42, "/data", "nfs4", "192.168.1.1:/srv/test")});
  ASSERT_EQ(tree.devices.size(), 1u);
  EXPECT_EQ(tree.devices[0].kind, BlockKind::kNfs);
  EXPECT_EQ(tree.devices[0].served_by, "nfs4 server 192.168.1.1:/srv/test");
  EXPECT_EQ(tree.devices[0].mounts.size(), 2u);
  EXPECT_EQ(tree.deviceHoldingPath("/data/train/0001.jpg"), "/mnt/nfs/test");
}

TEST(MountTargets, FuseDaemonIsNamedBySubtypeElseTheOnlyOne) {
  DeviceTree tree;
  attachMounts(tree, {mount(0, 50, "/mnt/s3", "fuse.s3fs", "s3fs"),
                      mount(0, 51, "/mnt/gcs", "fuse", "bucket")});
  nameFuseDaemons(tree, {{100, "sshfs"}, {200, "s3fs"}});
  EXPECT_EQ(tree.find("/mnt/s3")->served_by, "FUSE daemon s3fs (pid 200)");
  EXPECT_EQ(tree.find("/mnt/gcs")->served_by, "FUSE, daemon one of 2 processes holding /dev/fuse");
  nameFuseDaemons(tree, {{300, "gcsfuse"}});
  EXPECT_EQ(tree.find("/mnt/gcs")->served_by, "FUSE daemon gcsfuse (pid 300)");
}

// The collector through a root tree: an NFS mount whose counters move between two ticks and
// a FUSE mount with requests waiting for its daemon.
TEST(MountTargetsCollector, SamplesNfsAndFuseThroughTheRootTree) {
  testing::ScratchDir dir;
  const auto root = SystemRoot::under(dir.path());
  testing::writeFile(dir.path() / "proc/self/mountinfo",
                     "30 1 0:42 / /data rw - nfs4 10.0.0.5:/export rw\n"
                     "31 1 0:55 / /mnt/slow rw - fuse.slowfs slowfs rw\n");
  auto stats = [](uint64_t ops, uint64_t exe) {
    return "device 10.0.0.5:/export mounted on /data with fstype nfs4 statvers=1.1\n"
           "\tage:\t10\n\tper-op statistics\n\t        READ: " +
           std::to_string(ops) + " " + std::to_string(ops) + " 0 0 " + std::to_string(ops * 4096) +
           " 0 " + std::to_string(exe) + " " + std::to_string(exe) + " 0\n";
  };
  testing::writeFile(dir.path() / "proc/self/mountstats", stats(100, 200));
  testing::writeFile(dir.path() / "sys/fs/fuse/connections/55/waiting", "3\n");
  std::filesystem::create_directories(dir.path() / "sys/block");
  auto udev = makeUdevDatabaseSource(root);
  auto tree = std::make_shared<const DeviceTree>(scanBlockDevices(root, *udev));
  auto collector = makeMountTargetsCollector(root);
  collector->setDeviceTree(tree);
  SampleBatch first;
  collector->collect({1'000'000'000, 1000}, first);
  testing::writeFile(dir.path() / "proc/self/mountstats", stats(150, 2200));
  SampleBatch second;
  const auto result = collector->collect({2'000'000'000, 2000}, second);
  EXPECT_EQ(result.outcome, Outcome::kData) << result.message;
  ASSERT_EQ(second.disks.size(), 2u);
  const DiskSample& nfs = second.disks[0];
  EXPECT_EQ(nfs.device, "/data");
  EXPECT_EQ(nfs.minor, 42u);
  EXPECT_DOUBLE_EQ(nfs.rates.reads_per_second, 50);
  EXPECT_DOUBLE_EQ(*nfs.rates.r_await_ms, 40);
  EXPECT_DOUBLE_EQ(nfs.rates.aqu_sz, 2.0);
  ASSERT_TRUE(nfs.nfs);
  EXPECT_DOUBLE_EQ(*nfs.nfs->read_rtt_ms, 40);
  const DiskSample& fuse = second.disks[1];
  EXPECT_EQ(fuse.device, "/mnt/slow");
  EXPECT_DOUBLE_EQ(fuse.rates.aqu_sz, 3);
  EXPECT_EQ(fuse.in_flight, 3u);
}

}  // namespace
}  // namespace stallwatch::collectors

namespace stallwatch::collectors {
namespace {

// fusectl's files cannot seek (pread fails with ESPIPE): they are read in sequence. A pipe
// whose writer has closed stands in for one here.
TEST(ProcFile, ReadsAFileThatCannotSeek) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "7\n", 2), 2);
  ::close(fds[1]);
  auto text = readAttribute("/proc/self/fd/" + std::to_string(fds[0]));
  ::close(fds[0]);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "7");
}

}  // namespace
}  // namespace stallwatch::collectors
