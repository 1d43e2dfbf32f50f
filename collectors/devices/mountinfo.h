// /proc/<pid>/mountinfo: which device holds which mount point.
// Source: Documentation/filesystems/proc.rst, section 3.5:
//   36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//   (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
// (7) is zero or more optional fields ended by the "-" separator. Paths escape space, tab,
// newline and backslash as octal (\040, \011, \012, \134).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

struct MountInfo {
  uint32_t mount_id = 0;
  uint32_t parent_id = 0;
  uint32_t major = 0;
  uint32_t minor = 0;
  std::string root;         // path inside the filesystem that is mounted (bind mounts)
  std::string mount_point;  // unescaped
  std::string options;
  std::string fs_type;
  std::string source;  // e.g. /dev/nvme0n1p2, or "none"
  std::string super_options;
};

struct MountinfoParse {
  std::vector<MountInfo> mounts;
  std::vector<ParseProblem> skipped;
};

// Pure: parses mountinfo text.
MountinfoParse parseMountinfo(std::string_view text);

// True when PATH lies on the filesystem mounted at MOUNT_POINT (as a path component prefix:
// /data/x is under /data, /datax is not). The longest such mount point holds the file.
bool pathIsUnder(const std::string& path, const std::string& mount_point);

// Undoes the kernel's octal escapes in a mountinfo path.
std::string unescapeMountPath(std::string_view path);
// A mount point or source as the kernel escapes it, unescaped and made a safe text (valid UTF-8,
// at most kMaxMountTextBytes): it names a device in the DB, JSON and /metrics. Paths the
// agent opens or matches by prefix use unescapeMountPath alone.
inline constexpr size_t kMaxMountTextBytes = 1024;
std::string mountText(std::string_view escaped);

// The agent's own view (ROOT/proc/self/mountinfo; ROOT/proc/1/mountinfo where a fixture tree
// has no self link). nullopt if neither can be read.
std::optional<MountinfoParse> readMountinfo(const SystemRoot& root);
// Where a mount point of that table is found from here: itself on the live host, under ROOT's
// sys for a captured tree's /sys/...; none for a captured tree's other mounts.
std::optional<std::filesystem::path> mountPointUnder(const SystemRoot& root,
                                                     const std::string& mount_point);

// Tells when the mount table changed: the kernel flags /proc/self/mountinfo with POLLPRI
// (proc(5)), so one poll() with no timeout per tick answers without reading the table.
class MountWatcher {
 public:
  explicit MountWatcher(const SystemRoot& root);
  ~MountWatcher();
  MountWatcher(const MountWatcher&) = delete;
  MountWatcher& operator=(const MountWatcher&) = delete;
  // True once after each change; false where the file cannot be watched (a fixture tree).
  bool changed();

 private:
  int fd_ = -1;
};

}  // namespace stallwatch::collectors
