#include "collectors/devices/mountinfo.h"

#include <gtest/gtest.h>

#include "collectors/proc_file.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

TEST(MountinfoParse, ReadsTheKernelDocumentationExample) {
  const auto parsed = parseMountinfo(
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n");
  ASSERT_EQ(parsed.mounts.size(), 1u);
  const MountInfo& m = parsed.mounts[0];
  EXPECT_EQ(m.mount_id, 36u);
  EXPECT_EQ(m.parent_id, 35u);
  EXPECT_EQ(m.major, 98u);
  EXPECT_EQ(m.minor, 0u);
  EXPECT_EQ(m.root, "/mnt1");
  EXPECT_EQ(m.mount_point, "/mnt2");
  EXPECT_EQ(m.fs_type, "ext3");
  EXPECT_EQ(m.source, "/dev/root");
  EXPECT_EQ(m.super_options, "rw,errors=continue");
}

struct MountCase {
  const char* name;
  const char* text;
  size_t mounts;
  size_t skipped;
};

class MountinfoParseTable : public ::testing::TestWithParam<MountCase> {};

TEST_P(MountinfoParseTable, Parses) {
  const auto& c = GetParam();
  const auto parsed = parseMountinfo(c.text);
  EXPECT_EQ(parsed.mounts.size(), c.mounts) << c.name;
  EXPECT_EQ(parsed.skipped.size(), c.skipped) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Lines, MountinfoParseTable,
    ::testing::Values(MountCase{"empty", "", 0, 0},
                      MountCase{"no optional fields", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n", 1, 0},
                      MountCase{"several optional fields",
                                "1 0 8:1 / / rw shared:1 master:2 - ext4 /dev/sda1 rw\n", 1, 0},
                      MountCase{"no separator", "1 0 8:1 / / rw shared:1 ext4 /dev/sda1 rw\n", 0,
                                1},
                      MountCase{"separator but no source", "1 0 8:1 / / rw - ext4\n", 0, 1},
                      MountCase{"bad device number", "1 0 8-1 / / rw - ext4 /dev/sda1 rw\n", 0, 1},
                      MountCase{"bad mount id", "x 0 8:1 / / rw - ext4 /dev/sda1 rw\n", 0, 1},
                      MountCase{"truncated", "1 0 8:1\n", 0, 1}),
    testing::CaseName());

TEST(MountinfoParse, UnescapesOctalInPaths) {
  EXPECT_EQ(unescapeMountPath("/a\\040b\\011c\\134d"), "/a b\tc\\d");
  EXPECT_EQ(unescapeMountPath("/trailing\\04"), "/trailing\\04");  // incomplete escape kept
  EXPECT_EQ(unescapeMountPath("/not\\999octal"), "/not\\999octal");
}

TEST(MountinfoParse, NodeExporterHostTable) {
  auto text = readTextFile(testing::fixtures() / "procfs/node_exporter/proc/1/mountinfo");
  ASSERT_TRUE(text);
  const auto parsed = parseMountinfo(*text);
  EXPECT_TRUE(parsed.skipped.empty());
  bool found_escaped = false;
  for (const auto& m : parsed.mounts) {
    if (m.mount_point.find("[vsanDatastore] bafb9e5a") != std::string::npos) {
      found_escaped = true;
      EXPECT_EQ(m.source, "/dev/sda");
      EXPECT_EQ(m.major, 260u);
    }
  }
  EXPECT_TRUE(found_escaped);
  // The last line has no optional fields.
  EXPECT_EQ(parsed.mounts.back().fs_type, "xfs");
  EXPECT_EQ(parsed.mounts.back().source, "/dev/mapper/rhel-root");
}

TEST(MountinfoParse, FirstLineWithAnEmptyRootField) {
  auto text = readTextFile(testing::fixtures() / "procfs/node_exporter/proc/10/mountinfo");
  ASSERT_TRUE(text);
  const auto parsed = parseMountinfo(*text);
  EXPECT_TRUE(parsed.skipped.empty());
  ASSERT_FALSE(parsed.mounts.empty());
  EXPECT_EQ(parsed.mounts[0].root, "/");
  EXPECT_EQ(parsed.mounts[0].mount_point, "/root");
  EXPECT_EQ(parsed.mounts[0].fs_type, "rootfs");
}

}  // namespace
}  // namespace stallwatch::collectors
