// The block device tree as sysfs describes it, with each device's identity and mounts:
//   partition → its disk            (/sys/block/<disk>/<part>/partition)
//   dm-N, mdN → the devices under it (/sys/block/<dev>/slaves/)
//   loopN     → its backing file (/sys/block/loopN/loop/backing_file) and the device that
//               holds that file, found through mountinfo rather than stat(), so that mapping
//               never touches a disk that may be hung.
// and the mounts that no block device serves, each a storage target of its own, named by its
// mount point (block device names never start with '/'):
//   NFS       → its server and export (the mount's source);
//   FUSE      → the daemon that serves it (a process holding /dev/fuse);
//   overlay   → the devices that hold its upper and lower directories (a container's root).
// tmpfs, ramfs and other memory or pseudo filesystems are never targets: memory is not a disk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/devices/device_identity.h"
#include "collectors/devices/mountinfo.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

enum class BlockKind { kDisk, kPartition, kDeviceMapper, kMd, kLoop, kNfs, kFuse, kOverlay };
const char* toString(BlockKind kind);

struct BlockMount {
  std::string mount_point;
  std::string fs_type;
  std::string source;
};

// A mount point's storage target kind, or nullopt for a filesystem that is not one (block
// filesystems map to their device; memory and pseudo filesystems to nothing).
std::optional<BlockKind> mountTargetKind(const std::string& fs_type);
bool isMountTarget(BlockKind kind);

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
  std::string served_by;            // NFS, FUSE, overlay: what serves it, for people
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
  // Every device below NAME, nearest first (an overlay's loop device, then the disk under
  // that), without NAME itself.
  std::vector<std::string> devicesBelow(const std::string& name) const;
  // The device that holds PATH, by the longest mount-point prefix; empty if none.
  std::string deviceHoldingPath(const std::string& path) const;
};

// Reads ROOT's sysfs and mountinfo. Identity comes from UDEV, sysfs as the fallback.
DeviceTree scanBlockDevices(const SystemRoot& root, UdevPropertySource& udev);

// Pure: the tree from already-read mounts (for tests of the mapping rules): each mount attached
// to its block device, and the mounts no block device serves added as targets of their own.
void attachMounts(DeviceTree& tree, const std::vector<MountInfo>& mounts);

// A process holding /dev/fuse open: a FUSE daemon.
struct FuseDaemon {
  uint32_t pid = 0;
  std::string comm;
};
// Pure: names the daemon of each FUSE target from the processes holding /dev/fuse. The kernel
// does not say which connection a descriptor serves; the daemon whose name matches the
// mount's subtype (fuse.NAME) or source is taken, else the only one.
void nameFuseDaemons(DeviceTree& tree, const std::vector<FuseDaemon>& daemons);
// The processes under ROOT/proc holding ROOT/dev/fuse (their fd links). Read only when the
// tree has a FUSE target: it lists every process's descriptors.
std::vector<FuseDaemon> findFuseDaemons(const SystemRoot& root);

}  // namespace stallwatch::collectors
