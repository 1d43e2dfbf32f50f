// Parsers for the per-process files of /proc (Documentation/filesystems/proc.rst):
//   /proc/<pid>/stat      state, parent, CPU ticks (table 1-4 of proc.rst)
//   /proc/<pid>/io        bytes and syscalls read/written (section 3.3)
//   /proc/<pid>/environ, cmdline   NUL-separated strings
//   /proc/<pid>/task/<tid>/children   space-separated child pids (CONFIG_PROC_CHILDREN)
// Pure functions over text; the job tracker does the reading.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stallwatch::collectors {

struct ProcStat {
  uint32_t pid = 0;
  std::string comm;
  char state = '?';  // R, S, D (uninterruptible, usually I/O), Z, T, I, ...
  uint32_t ppid = 0;
  // Session id: a session leader (an interactive shell, sshd) has its own pid as its session.
  uint32_t session = 0;
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_time_ticks = 0;  // since boot: with the pid, identifies the process
  uint32_t num_threads = 0;
};

// nullopt (and WHY) for text that is not a stat line. comm may hold spaces and ')'.
std::optional<ProcStat> parseProcStat(std::string_view text, std::string* why = nullptr);

struct ProcIo {
  uint64_t rchar = 0;  // bytes read through read-like syscalls, cache hits included
  uint64_t wchar = 0;
  uint64_t syscr = 0;  // read syscalls
  uint64_t syscw = 0;
  uint64_t read_bytes = 0;  // bytes fetched from storage (block layer)
  uint64_t write_bytes = 0;
  uint64_t cancelled_write_bytes = 0;
};

std::optional<ProcIo> parseProcIo(std::string_view text, std::string* why = nullptr);

// NUL-separated lists (environ, cmdline); a missing final NUL is accepted.
std::vector<std::string> splitNul(std::string_view text);
std::map<std::string, std::string> parseEnviron(std::string_view text);

// Whitespace-separated pids (task/<tid>/children, cgroup.procs); junk tokens are skipped.
std::vector<uint32_t> parsePidList(std::string_view text);

}  // namespace stallwatch::collectors
