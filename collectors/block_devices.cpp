#include "collectors/block_devices.h"

#include <algorithm>
#include <functional>
#include <set>
#include <system_error>

#include "collectors/proc_file.h"
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
  }
  return "unknown";
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

std::vector<std::string> DeviceTree::physicalDevices(const std::string& name) const {
  std::vector<std::string> out;
  std::set<std::string> visited;  // sysfs is a tree, but a fixture or a bug could loop
  std::function<void(const std::string&)> walk = [&](const std::string& n) {
    if (!visited.insert(n).second) return;
    const BlockDevice* d = find(n);
    if (!d) return;
    std::vector<std::string> below;
    if (d->kind == BlockKind::kPartition && !d->parent.empty()) below.push_back(d->parent);
    below.insert(below.end(), d->slaves.begin(), d->slaves.end());
    if (d->kind == BlockKind::kLoop && !d->backing_device.empty()) {
      below.push_back(d->backing_device);
    }
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

void attachMounts(DeviceTree& tree, const std::vector<MountInfo>& mounts) {
  for (auto& d : tree.devices) d.mounts.clear();
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
  for (auto& d : tree.devices) {
    if (d.kind == BlockKind::kLoop && !d.backing_file.empty()) {
      d.backing_device = tree.deviceHoldingPath(d.backing_file);
    }
  }
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
  return tree;
}

}  // namespace stallwatch::collectors
