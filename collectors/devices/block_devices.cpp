#include "collectors/devices/block_devices.h"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>
#include <system_error>

#include "collectors/proc_file.h"
#include "collectors/process_reader.h"
#include "collectors/text_scan.h"

namespace fs = std::filesystem;

namespace stallwatch::collectors {
namespace {

void readDevnum(const fs::path& dir, BlockDevice& device) {
  auto dev = readAttribute(dir / "dev");
  if (!dev) return;
  const size_t colon = dev->find(':');
  if (colon == std::string::npos) return;
  auto major = parseUnsigned(std::string_view(*dev).substr(0, colon));
  auto minor = parseUnsigned(std::string_view(*dev).substr(colon + 1));
  if (major && minor && *major <= UINT32_MAX && *minor <= UINT32_MAX) {
    device.major = static_cast<uint32_t>(*major);
    device.minor = static_cast<uint32_t>(*minor);
  }
}

std::vector<std::string> listDir(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool pathExists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

BlockKind kindOf(const fs::path& dir, const std::string& name) {
  if (pathExists(dir / "dm")) return BlockKind::kDeviceMapper;
  if (pathExists(dir / "md")) return BlockKind::kMd;
  if (pathExists(dir / "loop") || name.rfind("loop", 0) == 0) return BlockKind::kLoop;
  return BlockKind::kDisk;
}

}  // namespace

const char* toString(BlockKind kind) {
  switch (kind) {
    case BlockKind::kDisk:
      return "disk";
    case BlockKind::kPartition:
      return "partition";
    case BlockKind::kDeviceMapper:
      return "dm";
    case BlockKind::kMd:
      return "md";
    case BlockKind::kLoop:
      return "loop";
    case BlockKind::kNfs:
      return "nfs";
    case BlockKind::kFuse:
      return "fuse";
    case BlockKind::kOverlay:
      return "overlay";
  }
  return "unknown";
}

std::optional<BlockKind> mountTargetKind(const std::string& fs_type) {
  if (fs_type == "nfs" || fs_type == "nfs4") return BlockKind::kNfs;
  // fuseblk has a block device of its own and maps to it like any block filesystem.
  if (fs_type == "fuse" || fs_type.rfind("fuse.", 0) == 0) return BlockKind::kFuse;
  if (fs_type == "overlay") return BlockKind::kOverlay;
  return std::nullopt;
}

bool isMountTarget(BlockKind kind) {
  return kind == BlockKind::kNfs || kind == BlockKind::kFuse || kind == BlockKind::kOverlay;
}

const BlockDevice* DeviceTree::find(const std::string& name) const {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const BlockDevice* DeviceTree::findByDevnum(uint32_t major, uint32_t minor) const {
  for (const auto& d : devices) {
    if (d.major == major && d.minor == minor) return &d;
  }
  return nullptr;
}

namespace {

// The devices right under D: a partition's disk, dm/md members or an overlay's layers, the
// device holding a loop device's file.
std::vector<std::string> directlyBelow(const BlockDevice& d) {
  std::vector<std::string> below;
  if (d.kind == BlockKind::kPartition && !d.parent.empty()) below.push_back(d.parent);
  below.insert(below.end(), d.slaves.begin(), d.slaves.end());
  if (d.kind == BlockKind::kLoop && !d.backing_device.empty()) below.push_back(d.backing_device);
  return below;
}

}  // namespace

std::vector<std::string> DeviceTree::devicesBelow(const std::string& name) const {
  std::vector<std::string> out;
  std::set<std::string> seen{name};
  std::vector<std::string> level{name};
  while (!level.empty()) {  // breadth first: nearest first
    std::vector<std::string> next;
    for (const auto& n : level) {
      const BlockDevice* d = find(n);
      if (!d) continue;
      for (auto& b : directlyBelow(*d)) {
        if (seen.insert(b).second) {
          out.push_back(b);
          next.push_back(b);
        }
      }
    }
    level = std::move(next);
  }
  return out;
}

std::vector<std::string> DeviceTree::physicalDevices(const std::string& name) const {
  std::vector<std::string> out;
  std::set<std::string> visited;  // sysfs is a tree, but a fixture or a bug could loop
  std::function<void(const std::string&)> walk = [&](const std::string& n) {
    if (!visited.insert(n).second) return;
    const BlockDevice* d = find(n);
    if (!d) return;
    const std::vector<std::string> below = directlyBelow(*d);
    if (below.empty()) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
      return;
    }
    for (const auto& b : below) walk(b);
  };
  walk(name);
  return out;
}

std::string DeviceTree::deviceHoldingPath(const std::string& path) const {
  const BlockDevice* best = nullptr;
  size_t best_length = 0;
  for (const auto& d : devices) {
    for (const auto& m : d.mounts) {
      if (pathIsUnder(path, m.mount_point) && (!best || m.mount_point.size() > best_length)) {
        best = &d;
        best_length = m.mount_point.size();
      }
    }
  }
  return best ? best->name : std::string{};
}

namespace {

// The directories an overlay is made of, from its super options: lowerdir=A:B (or one
// lowerdir+= per layer, as the new mount API shows them), upperdir=, datadir+=. Values are
// octal-escaped like mount paths (seq_show_option).
std::vector<std::string> overlayLayers(std::string_view options) {
  std::vector<std::string> dirs;
  while (!options.empty()) {
    const size_t comma = options.find(',');
    const std::string_view option = options.substr(0, comma);
    options = comma == std::string_view::npos ? std::string_view{} : options.substr(comma + 1);
    const size_t eq = option.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = option.substr(0, eq);
    std::string_view value = option.substr(eq + 1);
    if (key == "upperdir" || key == "lowerdir+" || key == "datadir+") {
      dirs.push_back(unescapeMountPath(value));
    } else if (key == "lowerdir") {
      while (!value.empty()) {
        const size_t colon = value.find(':');
        dirs.push_back(unescapeMountPath(value.substr(0, colon)));
        value = colon == std::string_view::npos ? std::string_view{} : value.substr(colon + 1);
      }
    }
  }
  return dirs;
}

// The device or target holding PATH: the mount with the longest mount-point prefix among all
// of them (a tmpfs included, which holds it in memory: no device), then what serves that mount.
std::string holderOf(const DeviceTree& tree, const std::vector<MountInfo>& mounts,
                     const std::string& path) {
  const MountInfo* best = nullptr;
  for (const MountInfo& m : mounts) {
    if (pathIsUnder(path, m.mount_point) &&
        (!best || m.mount_point.size() >= best->mount_point.size())) {
      best = &m;  // >=: of mounts stacked on one point, the last one mounted is visible
    }
  }
  if (!best) return {};
  for (const auto& d : tree.devices) {
    for (const auto& m : d.mounts) {
      if (m.mount_point == best->mount_point && m.fs_type == best->fs_type) return d.name;
    }
  }
  return {};
}

// The mounts no block device serves (NFS, FUSE, overlay), one target per device number,
// named by its first mount point.
void addMountTargets(DeviceTree& tree, const std::vector<MountInfo>& mounts) {
  std::vector<const MountInfo*> overlays;
  for (const MountInfo& m : mounts) {
    const auto kind = mountTargetKind(m.fs_type);
    if (!kind || tree.findByDevnum(m.major, m.minor)) {
      if (kind) {  // another mount point of a target already added (a bind mount)
        for (auto& d : tree.devices) {
          if (d.major == m.major && d.minor == m.minor) {
            d.mounts.push_back({m.mount_point, m.fs_type, m.source});
          }
        }
      }
      continue;
    }
    BlockDevice target;
    target.name = m.mount_point;
    target.kind = *kind;
    target.major = m.major;
    target.minor = m.minor;
    target.mounts.push_back({m.mount_point, m.fs_type, m.source});
    if (*kind == BlockKind::kNfs) target.served_by = m.fs_type + " server " + m.source;
    tree.devices.push_back(std::move(target));
    if (*kind == BlockKind::kOverlay) overlays.push_back(&m);
  }
  // An overlay's layers are directories on other filesystems: the devices holding them are
  // the ones under it (its "slaves"), the way a dm device lists its members.
  for (const MountInfo* m : overlays) {
    BlockDevice* overlay = nullptr;
    for (auto& d : tree.devices) {
      if (d.kind == BlockKind::kOverlay && d.major == m->major && d.minor == m->minor) overlay = &d;
    }
    if (!overlay) continue;
    std::vector<std::string> layers;
    size_t in_memory = 0;  // layers on tmpfs and the like
    for (const std::string& dir : overlayLayers(m->super_options)) {
      const std::string holder = holderOf(tree, mounts, dir);
      if (holder.empty()) ++in_memory;
      if (!holder.empty() && holder != overlay->name &&
          std::find(layers.begin(), layers.end(), holder) == layers.end()) {
        layers.push_back(holder);
      }
    }
    overlay->served_by =
        layers.empty() ? "overlay, no layer on a device" : "overlay over " + joinNames(layers);
    if (!layers.empty() && in_memory > 0) overlay->served_by += " (and layers in memory)";
    overlay->slaves = std::move(layers);
  }
}

}  // namespace

void attachMounts(DeviceTree& tree, const std::vector<MountInfo>& mounts) {
  for (auto& d : tree.devices) d.mounts.clear();
  tree.devices.erase(std::remove_if(tree.devices.begin(), tree.devices.end(),
                                    [](const BlockDevice& d) { return isMountTarget(d.kind); }),
                     tree.devices.end());
  for (const MountInfo& m : mounts) {
    BlockDevice* target = nullptr;
    for (auto& d : tree.devices) {
      if (d.major == m.major && d.minor == m.minor) target = &d;
    }
    // btrfs and some others report an anonymous 0:N device: fall back to the source path.
    if (!target && m.source.rfind("/dev/", 0) == 0) {
      const std::string base = fs::path(m.source).filename().string();
      const bool mapper = m.source.rfind("/dev/mapper/", 0) == 0;
      for (auto& d : tree.devices) {
        if ((!mapper && d.name == base) || (mapper && d.dm_name == base)) target = &d;
      }
    }
    if (target) target->mounts.push_back({m.mount_point, m.fs_type, m.source});
  }
  addMountTargets(tree, mounts);
  for (auto& d : tree.devices) {
    if (d.kind == BlockKind::kLoop && !d.backing_file.empty()) {
      d.backing_device = holderOf(tree, mounts, d.backing_file);
    }
  }
}

void nameFuseDaemons(DeviceTree& tree, const std::vector<FuseDaemon>& daemons) {
  for (auto& d : tree.devices) {
    if (d.kind != BlockKind::kFuse || d.mounts.empty()) continue;
    const BlockMount& m = d.mounts.front();
    const std::string subtype = m.fs_type.rfind("fuse.", 0) == 0 ? m.fs_type.substr(5) : "";
    const std::string source = fs::path(m.source).filename().string();
    const FuseDaemon* match = nullptr;
    for (const auto& daemon : daemons) {
      // comm is cut at 15 characters: compare that much.
      auto same = [&](const std::string& name) {
        return !name.empty() && name.substr(0, 15) == daemon.comm;
      };
      if (same(subtype) || same(source)) match = &daemon;
    }
    if (!match && daemons.size() == 1) match = &daemons.front();
    if (match) {
      d.served_by = "FUSE daemon " + match->comm + " (pid " + std::to_string(match->pid) + ")";
    } else {
      d.served_by = daemons.empty() ? "FUSE, daemon not found"
                                    : "FUSE, daemon one of " + std::to_string(daemons.size()) +
                                          " processes holding /dev/fuse";
    }
  }
}

std::vector<FuseDaemon> findFuseDaemons(const SystemRoot& root) {
  std::vector<FuseDaemon> daemons;
  const ProcessReader reader(root.proc);
  char target[64];
  constexpr std::string_view kFuse = "/dev/fuse";
  for (uint32_t pid : reader.allPids()) {
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator(root.proc / std::to_string(pid) / "fd", ec)) {
      // readlink only: the kernel's name for the descriptor, nothing is opened.
      const ssize_t n = ::readlink(fd.path().c_str(), target, sizeof target);
      if (n != static_cast<ssize_t>(kFuse.size()) ||
          kFuse != std::string_view(target, kFuse.size()))
        continue;
      auto stat = reader.stat(pid);
      daemons.push_back({pid, stat ? stat->comm : std::string()});
      break;
    }
  }
  return daemons;
}

DeviceTree scanBlockDevices(const SystemRoot& root, UdevPropertySource& udev) {
  DeviceTree tree;
  const fs::path sys_block = root.sys / "block";
  for (const std::string& name : listDir(sys_block)) {
    const fs::path dir = sys_block / name;
    BlockDevice disk;
    disk.name = name;
    disk.kind = kindOf(dir, name);
    readDevnum(dir, disk);
    disk.slaves = listDir(dir / "slaves");
    if (disk.kind == BlockKind::kDeviceMapper) {
      disk.dm_name = readAttribute(dir / "dm" / "name").value_or("");
    }
    if (disk.kind == BlockKind::kLoop) {
      disk.backing_file = readAttribute(dir / "loop" / "backing_file").value_or("");
    }
    const UdevProperties props =
        disk.major ? udev.properties(*disk.major, *disk.minor) : UdevProperties{};
    disk.identity = identify(props, dir, name);
    std::vector<BlockDevice> partitions;
    for (const std::string& child : listDir(dir)) {
      if (!pathExists(dir / child / "partition")) continue;
      BlockDevice part;
      part.name = child;
      part.kind = BlockKind::kPartition;
      part.parent = name;
      readDevnum(dir / child, part);
      // A partition is its disk's hardware: inherit what sysfs keeps only on the disk.
      part.identity = disk.identity;
      if (auto size = readAttribute(dir / child / "size")) {
        if (auto sectors = parseUnsigned(*size)) part.identity.size_bytes = *sectors * 512;
      }
      partitions.push_back(std::move(part));
    }
    tree.devices.push_back(std::move(disk));
    for (auto& p : partitions) tree.devices.push_back(std::move(p));
  }
  if (auto mounts = readMountinfo(root)) attachMounts(tree, mounts->mounts);
  if (std::any_of(tree.devices.begin(), tree.devices.end(),
                  [](const BlockDevice& d) { return d.kind == BlockKind::kFuse; })) {
    nameFuseDaemons(tree, findFuseDaemons(root));
  }
  return tree;
}

}  // namespace stallwatch::collectors
