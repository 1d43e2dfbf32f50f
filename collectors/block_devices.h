// The block device tree as sysfs describes it, with each device's identity and mounts:
//   partition → its disk            (/sys/block/<disk>/<part>/partition)
//   dm-N, mdN → the devices under it (/sys/block/<dev>/slaves/)
//   loopN     → its backing file (/sys/block/loopN/loop/backing_file) and the device that
//               holds that file, found through mountinfo rather than stat(), so that mapping
//               never touches a disk that may be hung.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/device_identity.h"
#include "collectors/mountinfo.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

enum class BlockKind { kDisk, kPartition, kDeviceMapper, kMd, kLoop };
const char* toString(BlockKind kind);

struct BlockMount {
  std::string mount_point;
  std::string fs_type;
  std::string source;
};

struct BlockDevice {
  std::string name;
  std::optional<uint32_t> major;  // from the sysfs "dev" attribute
  std::optional<uint32_t> minor;
  BlockKind kind = BlockKind::kDisk;
  std::string parent;               // partitions: the whole disk
  std::vector<std::string> slaves;  // dm and md: the devices underneath
  std::string dm_name;              // dm: its mapper name (vg0-root)
  std::string backing_file;         // loop: the file it maps
  std::string backing_device;       // loop: the device whose filesystem holds that file
  DeviceIdentity identity;
  std::vector<BlockMount> mounts;
};

class DeviceTree {
 public:
  std::vector<BlockDevice> devices;

  const BlockDevice* find(const std::string& name) const;
  const BlockDevice* findByDevnum(uint32_t major, uint32_t minor) const;
  // The devices at the bottom of NAME's stack (partition → disk, dm/md → members,
  // loop → the device holding its file), recursively. A physical device gives itself.
  std::vector<std::string> physicalDevices(const std::string& name) const;
  // The device that holds PATH, by the longest mount-point prefix; empty if none.
  std::string deviceHoldingPath(const std::string& path) const;
};

// Reads ROOT's sysfs and mountinfo. Identity comes from UDEV, sysfs as the fallback.
DeviceTree scanBlockDevices(const SystemRoot& root, UdevPropertySource& udev);

// Pure: the tree from already-read mounts (for tests of the mapping rules).
void attachMounts(DeviceTree& tree, const std::vector<MountInfo>& mounts);

}  // namespace stallwatch::collectors
