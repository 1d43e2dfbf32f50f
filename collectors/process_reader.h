// Reads the /proc/<pid> files of a process once, for the job tracker's discovery, through the
// injected proc root (what it reads every tick of a followed process is ProcessWatch's). Every
// call tolerates the process having exited (nullopt / empty), which is normal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectors/devices/mountinfo.h"
#include "collectors/proc_pid.h"

namespace stallwatch::collectors {

class ProcessReader {
 public:
  explicit ProcessReader(std::filesystem::path proc);

  std::optional<ProcStat> stat(uint32_t pid) const;
  std::optional<ProcIo> io(uint32_t pid) const;  // needs ptrace access: same user or root
  std::string comm(uint32_t pid) const;          // "" if gone
  // Every pid in the proc root.
  std::vector<uint32_t> allPids() const;
  // Targets of /proc/PID/fd/* that are paths (not sockets, pipes, anon inodes or /dev), out of
  // at most MAX descriptors; EXAMINED (if given): how many descriptors were looked at.
  // With SHARED_WITH (the process it was forked from), a descriptor that is the same open file
  // as that process's descriptor of the same number is left out: a forked DataLoader worker
  // inherits its rank's hundreds, which are the rank's files, counted on the rank. Telling
  // them apart (kcmp) costs about half a readlink; where kcmp cannot be used (a proc root
  // other than this process's own /proc, a seccomp filter, no CONFIG_KCMP), every descriptor
  // is read.
  std::vector<std::string> openFiles(uint32_t pid, size_t max, size_t* examined = nullptr,
                                     std::optional<uint32_t> shared_with = std::nullopt) const;
  // How many descriptors PID holds open, as the kernel counts them for a stat of
  // /proc/PID/fd (Linux 6.2 on; a directory walk of nothing, 1-2 us against ~2 us a descriptor
  // for openFiles). nullopt where it cannot say: an older kernel (size 0), a proc root that is
  // not procfs (a fixture's directory has a size of its own), the process gone.
  std::optional<size_t> openFileCount(uint32_t pid) const;
  std::map<std::string, std::string> environ(uint32_t pid) const;
  std::vector<std::string> cmdline(uint32_t pid) const;
  std::optional<std::vector<MountInfo>> mounts(uint32_t pid) const;
  std::vector<uint32_t> cgroupProcs(const std::filesystem::path& cgroup) const;
  // Whether one of PID's threads is named NAME (task/TID/comm): PyTorch names its pin_memory
  // thread "pt_data_pin". Walks at most MAX_THREADS threads.
  bool hasThreadNamed(uint32_t pid, std::string_view name, size_t max_threads = 512) const;

  std::filesystem::path dir(uint32_t pid) const { return proc_ / std::to_string(pid); }

 private:
  // Whether descriptor FD of PID and of OTHER_PID are one open file (kcmp); false where that
  // cannot be told.
  bool sameOpenFile(uint32_t pid, uint32_t other_pid, int fd) const;

  std::filesystem::path proc_;
  // kcmp can be asked: the pids of proc_ are this process's own (its pid namespace's /proc),
  // and the call has not been refused.
  mutable bool kcmp_usable_ = false;
  bool procfs_ = false;  // proc_ is a procfs mount
};

}  // namespace stallwatch::collectors
