// The host's block device tree, rescanned when it may have changed (diskstats' device set or
// the mount table changed) and at least every RESCAN_EVERY (identity, loop backing files), and
// handed to whoever subscribed: collectors that map files to devices, the drive health
// thread, the writer. A rescan costs ~4.5 ms: not every tick.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/devices/block_devices.h"
#include "collectors/devices/device_identity.h"
#include "collectors/devices/mountinfo.h"
#include "collectors/samples.h"
#include "collectors/system_root.h"

namespace stallwatch::agent {

class DeviceTopology {
 public:
  using Subscriber = std::function<void(const std::shared_ptr<const collectors::DeviceTree>&)>;

  DeviceTopology(const collectors::SystemRoot& root, std::chrono::seconds rescan_every);

  void subscribe(Subscriber subscriber) { subscribers_.push_back(std::move(subscriber)); }
  // Scans now and tells every subscriber.
  void rescan();
  // After each tick: rescans if BATCH's disks differ from the last tick's, the mount table
  // changed, or the last scan is older than RESCAN_EVERY.
  void afterTick(const collectors::SampleBatch& batch, std::chrono::steady_clock::time_point now);

 private:
  const collectors::SystemRoot& root_;
  std::chrono::seconds rescan_every_;
  std::unique_ptr<collectors::UdevPropertySource> udev_;
  collectors::MountWatcher mounts_changed_;
  std::vector<std::string> disk_names_;  // diskstats' devices last tick, in the kernel's order
  std::chrono::steady_clock::time_point last_rescan_;
  std::vector<Subscriber> subscribers_;
};

}  // namespace stallwatch::agent
