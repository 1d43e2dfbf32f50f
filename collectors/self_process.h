// The agent's own process, as Prometheus client libraries export it (process_cpu_seconds_total,
// process_resident_memory_bytes, ...): an operator compares stallwatch's cost with node_exporter's
// on the same dashboard. From /proc/self/stat, /proc/self/fd, /proc/self/limits and /proc/stat's
// btime (all procfs: nothing here touches a disk the agent watches).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/proc_file.h"

namespace stallwatch::collectors {

struct SelfProcess {
  double cpu_seconds = 0;       // user + system
  uint64_t resident_bytes = 0;  // rss
  uint64_t virtual_bytes = 0;   // vsize
  std::optional<uint64_t> open_fds, max_fds;
  std::optional<double> start_time_seconds;  // Unix time
};

// Reads them again and again (each scrape of /metrics, issue 47): /proc/self/stat kept open and
// read with one pread, the boot time read once, the limits once a minute, the open files counted
// by the size the kernel gives /proc/self/fd (Linux 6.2 on; listed where it gives none). Not
// thread-safe: one a caller.
class SelfProcessReader {
 public:
  // PROC: the procfs root (/proc).
  explicit SelfProcessReader(std::filesystem::path proc = "/proc");
  // Nothing where /proc/self/stat cannot be read.
  std::optional<SelfProcess> read();

 private:
  std::filesystem::path proc_, fd_dir_;
  ProcFile stat_;
  std::string text_, error_;
  std::optional<uint64_t> boot_time_, max_fds_;
  std::optional<std::chrono::steady_clock::time_point> limits_read_;
  // Whether fd/ is procfs's: a captured root's is a plain folder, whose size is no count.
  std::optional<bool> fd_dir_on_proc_;
};

// Once: a reader of its own. Nothing where /proc/self/stat cannot be read.
std::optional<SelfProcess> readSelfProcess(const std::filesystem::path& proc = "/proc");

// The parts of the text, for tests: /proc/self/stat's rss (pages) and vsize (bytes) and times,
// "Max open files" of /proc/self/limits, btime of /proc/stat.
std::optional<SelfProcess> parseSelfStat(std::string_view stat, long ticks_per_second,
                                         long page_size);
std::optional<uint64_t> parseMaxOpenFiles(std::string_view limits);
std::optional<uint64_t> parseBootTime(std::string_view proc_stat);

}  // namespace stallwatch::collectors
