#include "agent/device_topology.h"

#include <gtest/gtest.h>

namespace stallwatch::agent {
namespace {

using namespace std::chrono_literals;

// Issue 47: a mount table that keeps changing (a Kubernetes node's pods) is asked about and
// answered with a scan at most once a gap; a change after a quiet spell is scanned at once,
// whatever else was scanned just before (a loop device attached, then mounted); the block
// devices changing, or the periodic rescan, are never held back.
TEST(DeviceTopology, AMountTableThatKeepsChangingIsRescannedOnceAGap) {
  int asked = 0;
  const auto changed = [&] {
    ++asked;
    return true;
  };
  const auto unchanged = [&] {
    ++asked;
    return false;
  };
  const auto never = std::chrono::steady_clock::duration::max();
  // The first change, a second after a scan for new devices: at once.
  EXPECT_TRUE(rescanDue(1s, never, false, changed, 600s, 10s));
  // Within the gap of the last scan for a change: the table is not even asked (its event
  // stays pending).
  EXPECT_FALSE(rescanDue(3s, 3s, false, changed, 600s, 10s));
  EXPECT_EQ(asked, 1);
  // Past it: asked, and scanned where it changed.
  EXPECT_TRUE(rescanDue(10s, 10s, false, changed, 600s, 10s));
  EXPECT_FALSE(rescanDue(2s, 45s, false, unchanged, 600s, 10s));
  EXPECT_EQ(asked, 3);
  // New block devices, or the periodic rescan: at once, whatever the gap.
  EXPECT_TRUE(rescanDue(1s, 1s, true, unchanged, 600s, 10s));
  EXPECT_TRUE(rescanDue(600s, 1s, false, unchanged, 600s, 10s));
  EXPECT_EQ(asked, 3);
}

}  // namespace
}  // namespace stallwatch::agent
