#include "collectors/devices/mountinfo.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "collectors/proc_file.h"
#include "collectors/text_scan.h"
#include "common/text.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kMaxMountinfoFields = 64;  // 10 fixed fields plus optional tags

bool isOctal(char c) { return c >= '0' && c <= '7'; }

}  // namespace

bool pathIsUnder(const std::string& path, const std::string& mount_point) {
  if (mount_point == "/") return !path.empty() && path[0] == '/';
  return path.size() >= mount_point.size() &&
         path.compare(0, mount_point.size(), mount_point) == 0 &&
         (path.size() == mount_point.size() || path[mount_point.size()] == '/');
}

std::string mountText(std::string_view escaped) {
  return common::boundedUtf8(unescapeMountPath(escaped), kMaxMountTextBytes);
}

std::string unescapeMountPath(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '\\' && i + 3 < path.size() && isOctal(path[i + 1]) && isOctal(path[i + 2]) &&
        isOctal(path[i + 3])) {
      out.push_back(static_cast<char>((path[i + 1] - '0') * 64 + (path[i + 2] - '0') * 8 +
                                      (path[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(path[i]);
    }
  }
  return out;
}

MountinfoParse parseMountinfo(std::string_view text) {
  MountinfoParse result;
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    std::string_view f[kMaxMountinfoFields];
    const size_t count = splitFields(line, f);
    if (count == 0) return;
    auto skip = [&](std::string message) {
      result.skipped.push_back({line_number, std::move(message)});
    };
    if (count > kMaxMountinfoFields) {
      skip("more than " + std::to_string(kMaxMountinfoFields) + " fields");
      return;
    }
    size_t separator = 6;
    while (separator < count && f[separator] != "-") ++separator;
    if (count < 10 || separator >= count || count - separator < 3) {
      skip(
          "expected 'id parent maj:min root mount-point options [tags] - type source "
          "super-options', found " +
          std::to_string(count) + " fields");
      return;
    }
    const auto mount_id = parseUnsigned(f[0]);
    const auto parent_id = parseUnsigned(f[1]);
    const auto devnum = parseDevnum(f[2]);
    if (!mount_id || !parent_id || *mount_id > UINT32_MAX || *parent_id > UINT32_MAX) {
      skip("mount ids '" + std::string(f[0]) + " " + std::string(f[1]) + "' are not integers");
      return;
    }
    if (!devnum) {
      skip("expected major:minor, found '" + std::string(f[2]) + "'");
      return;
    }
    MountInfo m;
    m.mount_id = static_cast<uint32_t>(*mount_id);
    m.parent_id = static_cast<uint32_t>(*parent_id);
    m.major = devnum->first;
    m.minor = devnum->second;
    m.root = unescapeMountPath(f[3]);
    m.mount_point = mountText(f[4]);
    m.options = std::string(f[5]);
    m.fs_type = common::boundedUtf8(f[separator + 1], 64);
    m.source = mountText(f[separator + 2]);
    if (separator + 3 < count) m.super_options = std::string(f[separator + 3]);
    result.mounts.push_back(std::move(m));
  });
  return result;
}

std::optional<MountinfoParse> readMountinfo(const SystemRoot& root) {
  for (const char* pid : {"self", "1"}) {
    if (auto text = readTextFile(root.proc / pid / "mountinfo")) return parseMountinfo(*text);
  }
  return std::nullopt;
}

std::optional<std::filesystem::path> mountPointUnder(const SystemRoot& root,
                                                     const std::string& mount_point) {
  if (root.isHost()) return mount_point;
  if (mount_point.rfind("/sys/", 0) == 0) return root.sys / mount_point.substr(5);
  return std::nullopt;
}

MountWatcher::MountWatcher(const SystemRoot& root) {
  fd_ = ::open((root.proc / "self" / "mountinfo").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0) {
    // The event is armed by a read: consume the current table once.
    char buffer[4096];
    while (::read(fd_, buffer, sizeof buffer) > 0) {
    }
  }
}

MountWatcher::~MountWatcher() {
  if (fd_ >= 0) ::close(fd_);
}

bool MountWatcher::changed() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLPRI, 0};
  if (::poll(&p, 1, 0) <= 0 || !(p.revents & (POLLPRI | POLLERR))) return false;
  char buffer[4096];
  ::lseek(fd_, 0, SEEK_SET);
  while (::read(fd_, buffer, sizeof buffer) > 0) {
  }
  return true;
}

}  // namespace stallwatch::collectors
