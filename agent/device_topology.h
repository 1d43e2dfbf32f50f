// The host's block device tree, rescanned when it may have changed (diskstats' device set or
// the mount table changed) and at least every RESCAN_EVERY (identity, loop backing files), and
// handed to whoever subscribed: collectors that map files to devices, the drive health
// thread, the writer. A rescan costs ~4.5 ms (10 with 2 000 mounts): not every tick, and not
// every tick of a mount table that keeps changing (rescanDue).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectors/devices/block_devices.h"
#include "collectors/devices/device_identity.h"
#include "collectors/devices/mountinfo.h"
#include "collectors/samples.h"
#include "collectors/system_root.h"

namespace stallwatch::agent {

// Whether the tree is due a scan after a tick, SINCE_SCAN the last one: at once when the block
// devices changed or RESCAN_EVERY passed; when the mount table changed (MOUNTS_CHANGED), at
// once unless a change was scanned for less than MOUNT_GAP ago (SINCE_MOUNT_SCAN): then the
// table is not asked until the gap has passed, the kernel keeping the change pending. A
// Kubernetes node's pods mount and unmount all day: each change asked about costs a read of the
// whole table to re-arm the event, and each scan 5-10 ms (issue 47: 10.5 ms a second with 2 000
// mounts, one changing twice a second).
bool rescanDue(std::chrono::steady_clock::duration since_scan,
               std::chrono::steady_clock::duration since_mount_scan, bool devices_changed,
               const std::function<bool()>& mounts_changed, std::chrono::seconds rescan_every,
               std::chrono::seconds mount_gap);

class DeviceTopology {
 public:
  using Subscriber = std::function<void(const std::shared_ptr<const collectors::DeviceTree>&)>;

  DeviceTopology(const collectors::SystemRoot& root, std::chrono::seconds rescan_every,
                 std::chrono::seconds mount_gap = std::chrono::seconds(10));

  void subscribe(Subscriber subscriber) { subscribers_.push_back(std::move(subscriber)); }
  // Scans now and tells every subscriber.
  void rescan();
  // After each tick: rescans if BATCH's disks differ from the last tick's, the mount table
  // changed, or the last scan is older than RESCAN_EVERY.
  void afterTick(const collectors::SampleBatch& batch, std::chrono::steady_clock::time_point now);

 private:
  const collectors::SystemRoot& root_;
  std::chrono::seconds rescan_every_, mount_gap_;
  std::unique_ptr<collectors::UdevPropertySource> udev_;
  collectors::MountWatcher mounts_changed_;
  std::vector<std::string> disk_names_;  // diskstats' devices last tick, in the kernel's order
  std::chrono::steady_clock::time_point last_rescan_;
  // The last scan for a change of the mount table; none yet: the first is scanned at once.
  std::optional<std::chrono::steady_clock::time_point> last_mount_scan_;
  std::vector<Subscriber> subscribers_;
};

}  // namespace stallwatch::agent
