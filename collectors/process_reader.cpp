#include "collectors/process_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <system_error>

#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace fs = std::filesystem;

namespace stallwatch::collectors {

std::optional<ProcStat> ProcessReader::stat(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "stat");
  return text ? parseProcStat(*text) : std::nullopt;
}

std::optional<ProcIo> ProcessReader::io(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "io");
  return text ? parseProcIo(*text) : std::nullopt;
}

namespace {

// Reads at most SIZE - 1 bytes of DIR_FD/NAME into BUFFER; the length read, 0 on failure.
size_t readSmall(int dir_fd, const char* name, char* buffer, size_t size) {
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buffer, size - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buffer[n] = '\0';
  return static_cast<size_t>(n);
}

}  // namespace

// Once per tick for every process of every job, over every thread (a PyTorch rank runs about a
// hundred): raw openat/read into a stack buffer and only the state field looked at, which
// costs a third of a generic file read and full parse (BM_ThreadStates in
// bench/collect_cycle_bench.cpp). The comm field may hold spaces and parentheses: the state is
// the first field after the last ')'.
ThreadStates ProcessReader::threadStates(uint32_t pid) const {
  ThreadStates out;
  const std::string task = (dir(pid) / "task").string();
  const int task_fd = ::open(task.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (task_fd < 0) return out;
  DIR* entries = ::fdopendir(task_fd);
  if (!entries) {
    ::close(task_fd);
    return out;
  }
  char path[sizeof(dirent::d_name) + 8];
  char buffer[1024];
  while (const dirent* e = ::readdir(entries)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "%s/stat", e->d_name);
    const size_t n = readSmall(task_fd, path, buffer, sizeof buffer);
    const char* close_paren = n ? std::strrchr(buffer, ')') : nullptr;
    if (!close_paren || close_paren[1] != ' ' || close_paren[2] != 'D') continue;
    ++out.d_state;
    std::snprintf(path, sizeof path, "%s/wchan", e->d_name);
    if (readSmall(task_fd, path, buffer, sizeof buffer)) {
      std::string wchan(buffer);
      while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == ' ')) wchan.pop_back();
      if (!wchan.empty() && wchan != "0") out.wchans.push_back(std::move(wchan));
    }
  }
  ::closedir(entries);  // closes task_fd
  return out;
}

std::vector<uint32_t> ProcessReader::children(uint32_t pid) const {
  auto text = readTextFile(dir(pid) / "task" / std::to_string(pid) / "children");
  return text ? parsePidList(*text) : std::vector<uint32_t>{};
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

std::vector<std::string> ProcessReader::openFiles(uint32_t pid, size_t max) const {
  std::vector<std::string> files;
  std::error_code ec;
  char target[4096];
  for (const auto& entry : fs::directory_iterator(dir(pid) / "fd", ec)) {
    if (files.size() >= max) break;
    // readlink only: the path comes from the kernel's dentry cache, nothing touches the disk.
    const ssize_t n = ::readlink(entry.path().c_str(), target, sizeof target - 1);
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
