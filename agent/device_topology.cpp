#include "agent/device_topology.h"

#include <algorithm>

namespace stallwatch::agent {

DeviceTopology::DeviceTopology(const collectors::SystemRoot& root,
                               std::chrono::seconds rescan_every)
    : root_(root),
      rescan_every_(rescan_every),
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
  if (devices_changed || mounts_changed_.changed() || now - last_rescan_ >= rescan_every_) rescan();
}

}  // namespace stallwatch::agent
