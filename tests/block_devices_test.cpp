#include "collectors/devices/block_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectors/proc_file.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

using ::testing::ElementsAre;

// Real capture: loop1 maps a file on loop0's ext4, loop0 maps a file on vda's root fs.
TEST(BlockDevices, LoopStackMapsDownToThePhysicalDisk) {
  const auto root = SystemRoot::under(testing::fixtures() / "host-6.18-loop-stack");
  auto udev = makeUdevDatabaseSource(root);
  const DeviceTree tree = scanBlockDevices(root, *udev);

  const BlockDevice* loop1 = tree.find("loop1");
  ASSERT_NE(loop1, nullptr);
  EXPECT_EQ(loop1->kind, BlockKind::kLoop);
  EXPECT_EQ(loop1->major, 7u);
  EXPECT_EQ(loop1->minor, 1u);
  EXPECT_EQ(loop1->backing_file, "/mnt/swdata/dataset.img");
  EXPECT_EQ(loop1->backing_device, "loop0");
  EXPECT_EQ(loop1->identity.size_bytes, 16u * 1024 * 1024);

  const BlockDevice* loop0 = tree.find("loop0");
  ASSERT_NE(loop0, nullptr);
  EXPECT_EQ(loop0->backing_device, "vda");
  ASSERT_EQ(loop0->mounts.size(), 1u);
  EXPECT_EQ(loop0->mounts[0].mount_point, "/mnt/swdata");
  EXPECT_EQ(loop0->mounts[0].fs_type, "ext4");

  EXPECT_THAT(tree.physicalDevices("loop1"), ElementsAre("vda"));
  EXPECT_THAT(tree.physicalDevices("vda"), ElementsAre("vda"));
  EXPECT_EQ(tree.deviceHoldingPath("/mnt/swdata/dataset.img"), "loop0");
  EXPECT_EQ(tree.deviceHoldingPath("/mnt/swdatax/file"), "vda");  // prefix, not a path component

  const BlockDevice* vda = tree.find("vda");
  ASSERT_NE(vda, nullptr);
  EXPECT_EQ(vda->identity.transport, "virtio");
  EXPECT_EQ(vda->identity.serial, "overlayblk");  // /sys/block/vda/serial: no udevd on that host
  EXPECT_EQ(tree.findByDevnum(254, 0), vda);
}

// prometheus/procfs: dm-1 is a multipath map over sdb and sdc.
TEST(BlockDevices, DeviceMapperSlavesAreTheDevicesUnderneath) {
  const auto root = SystemRoot::under(testing::fixtures() / "procfs/prometheus-procfs");
  auto udev = makeUdevDatabaseSource(root);
  const DeviceTree tree = scanBlockDevices(root, *udev);
  const BlockDevice* dm1 = tree.find("dm-1");
  ASSERT_NE(dm1, nullptr);
  EXPECT_EQ(dm1->kind, BlockKind::kDeviceMapper);
  EXPECT_EQ(dm1->dm_name, "mpathA");
  EXPECT_THAT(dm1->slaves, ElementsAre("sdb", "sdc"));
  EXPECT_THAT(tree.physicalDevices("dm-1"), ElementsAre("sdb", "sdc"));
  const BlockDevice* md0 = tree.find("md0");
  ASSERT_NE(md0, nullptr);
  EXPECT_EQ(md0->kind, BlockKind::kMd);
}

// /sys/block/nvme0n1 is a link into /sys/devices on a live system; recreate that link over
// procfs's NVMe namespace capture, whose partitions carry a "partition" file.
TEST(BlockDevices, PartitionsHangUnderTheirDisk) {
  testing::ScratchDir dir;
  std::filesystem::create_directories(dir.path() / "sys/block");
  std::filesystem::create_directory_symlink(testing::fixtures() /
                                                "procfs/prometheus-procfs/sys/devices/pci0000:00/"
                                                "0000:00:02.1/0000:01:00.0/nvme/nvme0/nvme0n1",
                                            dir.path() / "sys/block/nvme0n1");
  testing::writeFile(dir.path() / "proc/self/mountinfo",
                     "30 1 259:2 / /data rw - xfs /dev/nvme0n1p2 rw\n");
  const auto root = SystemRoot::under(dir.path());
  auto udev = makeUdevDatabaseSource(root);
  const DeviceTree tree = scanBlockDevices(root, *udev);
  ASSERT_EQ(tree.devices.size(), 4u);
  const BlockDevice* p2 = tree.find("nvme0n1p2");
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(p2->kind, BlockKind::kPartition);
  EXPECT_EQ(p2->parent, "nvme0n1");
  EXPECT_EQ(p2->major, 259u);
  EXPECT_EQ(p2->minor, 2u);
  EXPECT_EQ(p2->identity.transport, "nvme");
  EXPECT_EQ(p2->identity.rotational, false);
  ASSERT_EQ(p2->mounts.size(), 1u);
  EXPECT_EQ(p2->mounts[0].mount_point, "/data");
  EXPECT_THAT(tree.physicalDevices("nvme0n1p2"), ElementsAre("nvme0n1"));
}

TEST(BlockDevices, AnonymousDeviceNumbersMatchBySourcePath) {
  DeviceTree tree;
  BlockDevice sda;
  sda.name = "sda";
  sda.major = 8;
  sda.minor = 0;
  BlockDevice dm;
  dm.name = "dm-0";
  dm.kind = BlockKind::kDeviceMapper;
  dm.dm_name = "vg0-root";
  dm.major = 253;
  dm.minor = 0;
  tree.devices = {sda, dm};
  attachMounts(tree, parseMountinfo("1 0 0:33 / /srv rw - btrfs /dev/sda rw\n"
                                    "2 0 0:34 / /home rw - btrfs /dev/mapper/vg0-root rw\n")
                         .mounts);
  ASSERT_EQ(tree.find("sda")->mounts.size(), 1u);
  EXPECT_EQ(tree.find("sda")->mounts[0].mount_point, "/srv");
  ASSERT_EQ(tree.find("dm-0")->mounts.size(), 1u);
  EXPECT_EQ(tree.find("dm-0")->mounts[0].mount_point, "/home");
}

TEST(BlockDevices, CyclicSlavesDoNotLoopForever) {
  DeviceTree tree;
  BlockDevice a;
  a.name = "dm-0";
  a.kind = BlockKind::kDeviceMapper;
  a.slaves = {"dm-1"};
  BlockDevice b = a;
  b.name = "dm-1";
  b.slaves = {"dm-0"};
  tree.devices = {a, b};
  EXPECT_TRUE(tree.physicalDevices("dm-0").empty());
}

TEST(UdevDatabase, ParsesProperties) {
  auto text = readTextFile(testing::fixtures() / "procfs/node_exporter/udev/data/b8:0");
  ASSERT_TRUE(text);
  const auto props = parseUdevDatabase(*text);
  EXPECT_EQ(props.at("ID_MODEL"), "TOSHIBA_KSDB4U86");
  EXPECT_EQ(props.at("ID_SERIAL_SHORT"), "2160A0D5FVGG");
  EXPECT_EQ(props.count("disk/by-id/wwn-0x7c72382b8de36a64"), 0u);  // S: lines are not properties
  const DeviceIdentity id = identify(props, "/nonexistent", "sda");
  EXPECT_EQ(id.model, "TOSHIBA_KSDB4U86");
  EXPECT_EQ(id.serial, "2160A0D5FVGG");
  EXPECT_EQ(id.wwn, "0x7c72382b8de36a64");
  EXPECT_EQ(id.transport, "ata");
  EXPECT_EQ(id.rotation_rate_rpm, 7200u);
  EXPECT_FALSE(id.rotational);  // no sysfs here
}

TEST(UdevDatabase, IgnoresMalformedLines) {
  const auto props = parseUdevDatabase("E:\nE:=x\nE:GOOD=1\nX:BAD=2\nE:NOEQUALS\n");
  ASSERT_EQ(props.size(), 1u);
  EXPECT_EQ(props.at("GOOD"), "1");
}

}  // namespace
}  // namespace stallwatch::collectors
