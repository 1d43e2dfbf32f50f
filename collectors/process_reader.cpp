#include "collectors/process_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <system_error>

#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace fs = std::filesystem;

namespace stallwatch::collectors {

ProcessReader::ProcessReader(fs::path proc) : proc_(std::move(proc)) {
  // kcmp names processes by pid in this process's namespace: usable only where the proc root
  // is the /proc of that namespace (not a fixture, not a host's /proc mounted in a container).
  std::error_code ec;
  const fs::path self = fs::read_symlink(proc_ / "self", ec);
  kcmp_usable_ = !ec && proc_ == "/proc" && self.string() == std::to_string(::getpid());
  struct statfs fs {};
  procfs_ = ::statfs(proc_.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

std::optional<size_t> ProcessReader::openFileCount(uint32_t pid) const {
  if (!procfs_) return std::nullopt;
  struct stat st {};
  if (::stat((dir(pid) / "fd").c_str(), &st) != 0 || st.st_size <= 0) return std::nullopt;
  return static_cast<size_t>(st.st_size);
}

bool ProcessReader::sameOpenFile(uint32_t pid, uint32_t other_pid, int fd) const {
  if (!kcmp_usable_) return false;
  const long r =
      ::syscall(SYS_kcmp, static_cast<pid_t>(pid), static_cast<pid_t>(other_pid), KCMP_FILE,
                static_cast<unsigned long>(fd), static_cast<unsigned long>(fd));
  // Refused for every pair (no CONFIG_KCMP, a seccomp filter, no CAP_SYS_PTRACE): stop asking.
  // EBADF (the other has no such descriptor) and ESRCH (it exited) are answers for this pair.
  if (r < 0 && (errno == ENOSYS || errno == EPERM)) kcmp_usable_ = false;
  return r == 0;
}

std::optional<ProcStat> ProcessReader::stat(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "stat");
  return text ? parseProcStat(*text) : std::nullopt;
}

std::optional<ProcIo> ProcessReader::io(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "io");
  return text ? parseProcIo(*text) : std::nullopt;
}

std::string ProcessReader::comm(uint32_t pid) const {
  std::string text = readTextFile(dir(pid) / "comm").value_or("");
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

bool ProcessReader::hasThreadNamed(uint32_t pid, std::string_view name, size_t max_threads) const {
  std::error_code ec;
  size_t seen = 0;
  for (std::filesystem::directory_iterator it(dir(pid) / "task", ec), end;
       !ec && it != end && seen < max_threads; it.increment(ec), ++seen) {
    if (auto comm = readAttribute(it->path() / "comm"); comm && *comm == name) return true;
  }
  return false;
}

std::vector<uint32_t> ProcessReader::allPids() const {
  std::vector<uint32_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(proc_, ec)) {
    if (auto pid = parseUnsigned(entry.path().filename().string()); pid && *pid <= UINT32_MAX) {
      pids.push_back(static_cast<uint32_t>(*pid));
    }
  }
  return pids;
}

std::vector<std::string> ProcessReader::openFiles(uint32_t pid, size_t max, size_t* examined,
                                                  std::optional<uint32_t> shared_with) const {
  std::vector<std::string> files;
  if (examined) *examined = 0;
  const int fd_dir = ::open((dir(pid) / "fd").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_dir < 0) return files;
  DIR* entries = ::fdopendir(fd_dir);
  if (!entries) {
    ::close(fd_dir);
    return files;
  }
  char target[4096];
  size_t seen = 0;
  while (const dirent* e = ::readdir(entries)) {
    if (e->d_name[0] == '.') continue;
    if (seen++ >= max) break;
    if (shared_with) {
      int fd = -1;
      const std::string_view name(e->d_name);
      if (std::from_chars(name.data(), name.data() + name.size(), fd).ec == std::errc{} &&
          sameOpenFile(pid, *shared_with, fd)) {
        continue;
      }
    }
    // readlink only: the path comes from the kernel's dentry cache, nothing touches the disk.
    const ssize_t n = ::readlinkat(fd_dir, e->d_name, target, sizeof target - 1);
    if (n <= 0 || target[0] != '/') continue;  // socket:[..], pipe:[..], anon_inode:..
    std::string path(target, static_cast<size_t>(n));
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.size() > kDeleted.size() &&
        path.compare(path.size() - kDeleted.size(), kDeleted.size(), kDeleted) == 0) {
      path.resize(path.size() - kDeleted.size());
    }
    if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0 ||
        path.rfind("/sys/", 0) == 0) {
      continue;
    }
    files.push_back(std::move(path));
  }
  ::closedir(entries);  // closes fd_dir
  if (examined) *examined = seen;
  return files;
}

std::map<std::string, std::string> ProcessReader::environ(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "environ");
  return text ? parseEnviron(*text) : std::map<std::string, std::string>{};
}

std::vector<std::string> ProcessReader::cmdline(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "cmdline");
  return text ? splitNul(*text) : std::vector<std::string>{};
}

std::optional<std::vector<MountInfo>> ProcessReader::mounts(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "mountinfo");
  if (!text) return std::nullopt;
  return parseMountinfo(*text).mounts;
}

std::vector<uint32_t> ProcessReader::cgroupProcs(const fs::path& cgroup) const {
  auto text = readTextFile(cgroup / "cgroup.procs");
  return text ? parsePidList(*text) : std::vector<uint32_t>{};
}

}  // namespace stallwatch::collectors
