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

#include "collectors/mountinfo.h"
#include "collectors/proc_pid.h"

namespace stallwatch::collectors {

class ProcessReader {
 public:
  explicit ProcessReader(std::filesystem::path proc) : proc_(std::move(proc)) {}

  std::optional<ProcStat> stat(uint32_t pid) const;
  std::optional<ProcIo> io(uint32_t pid) const;  // needs ptrace access: same user or root
  std::string comm(uint32_t pid) const;          // "" if gone
  // Every pid in the proc root.
  std::vector<uint32_t> allPids() const;
  // Targets of /proc/PID/fd/* that are paths (not sockets, pipes, anon inodes or /dev), out of
  // at most MAX descriptors; EXAMINED (if given): how many descriptors were looked at.
  std::vector<std::string> openFiles(uint32_t pid, size_t max, size_t* examined = nullptr) const;
  std::map<std::string, std::string> environ(uint32_t pid) const;
  std::vector<std::string> cmdline(uint32_t pid) const;
  std::optional<std::vector<MountInfo>> mounts(uint32_t pid) const;
  std::vector<uint32_t> cgroupProcs(const std::filesystem::path& cgroup) const;

  std::filesystem::path dir(uint32_t pid) const { return proc_ / std::to_string(pid); }

 private:
  std::filesystem::path proc_;
};

}  // namespace stallwatch::collectors
