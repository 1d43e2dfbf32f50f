#include "agent/device_topology.h"

#include <algorithm>

namespace stallwatch::agent {

bool rescanDue(std::chrono::steady_clock::duration since_scan,
               std::chrono::steady_clock::duration since_mount_scan, bool devices_changed,
               const std::function<bool()>& mounts_changed, std::chrono::seconds rescan_every,
               std::chrono::seconds mount_gap) {
  if (devices_changed || since_scan >= rescan_every) return true;
  return since_mount_scan >= mount_gap && mounts_changed();
}

DeviceTopology::DeviceTopology(const collectors::SystemRoot& root,
                               std::chrono::seconds rescan_every, std::chrono::seconds mount_gap)
    : root_(root),
      rescan_every_(rescan_every),
      mount_gap_(mount_gap),
      udev_(collectors::makeUdevSourceFor(root)),
      mounts_changed_(root),
      last_rescan_(std::chrono::steady_clock::now()) {}

void DeviceTopology::rescan() {
  const auto tree =
      std::make_shared<const collectors::DeviceTree>(collectors::scanBlockDevices(root_, *udev_));
  for (const auto& s : subscribers_) s(tree);
  last_rescan_ = std::chrono::steady_clock::now();
}

void DeviceTopology::afterTick(const collectors::SampleBatch& batch,
                               std::chrono::steady_clock::time_point now) {
  const bool same =
      batch.disks.size() == disk_names_.size() &&
      std::equal(batch.disks.begin(), batch.disks.end(), disk_names_.begin(),
                 [](const auto& d, const std::string& name) { return d.device == name; });
  const bool devices_changed = !same && !disk_names_.empty();
  if (!same) {
    disk_names_.clear();
    for (const auto& d : batch.disks) disk_names_.push_back(d.device);
  }
  const auto since_mount_scan =
      last_mount_scan_ ? now - *last_mount_scan_ : std::chrono::steady_clock::duration::max();
  const auto mounts_changed = [&] {
    if (!mounts_changed_.changed()) return false;
    last_mount_scan_ = now;
    return true;
  };
  if (rescanDue(now - last_rescan_, since_mount_scan, devices_changed, mounts_changed,
                rescan_every_, mount_gap_))
    rescan();
}

}  // namespace stallwatch::agent
