// The agent's own process, as Prometheus client libraries export it (process_cpu_seconds_total,
// process_resident_memory_bytes, ...): an operator compares stallwatch's cost with node_exporter's
// on the same dashboard. From getrusage, /proc/self/statm, /proc/self/fd, /proc/self/limits, and
// once /proc/self/stat's start and /proc/stat's btime (all procfs: nothing here touches a disk the
// agent watches).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "collectors/proc_file.h"

namespace stallwatch::collectors {

struct SelfProcess {
  double cpu_seconds = 0;       // user + system
  uint64_t resident_bytes = 0;  // rss
  uint64_t virtual_bytes = 0;   // vsize
  std::optional<uint64_t> open_fds, max_fds;
  std::optional<double> start_time_seconds;  // Unix time
};

// Reads them again and again (each scrape of /metrics, issue 47), touching as little of procfs as
// it can, since each scrape finds the kernel's caches cold: the CPU time from getrusage (where
// /proc/self/stat made the kernel sum every thread's and format 52 fields: 15-18 us of a scrape),
// the memory from /proc/self/statm kept open, the open files from the size of /proc/self/fd
// (Linux 6.2 on) through a descriptor kept open (no path walked: 9 us where stat() took 21;
// listed where it gives no count), the start time once, the limits once a minute. Not
// thread-safe: one a caller.
class SelfProcessReader {
 public:
  // The process's user and system CPU time, seconds; nothing where it cannot be had.
  using CpuSeconds = std::function<std::optional<double>()>;
  // PROC: the procfs root (/proc). CPU_SECONDS: this process's, by default (a captured root's
  // test gives its own).
  explicit SelfProcessReader(std::filesystem::path proc = "/proc",
                             CpuSeconds cpu_seconds = processCpuSeconds);
  ~SelfProcessReader();
  SelfProcessReader(const SelfProcessReader&) = delete;
  SelfProcessReader& operator=(const SelfProcessReader&) = delete;
  // Nothing where /proc/self/statm cannot be read or the CPU time had.
  std::optional<SelfProcess> read();
  // This process's, from getrusage(RUSAGE_SELF): every thread's, those ended too.
  static std::optional<double> processCpuSeconds();

 private:
  std::filesystem::path proc_, fd_dir_;
  CpuSeconds cpu_seconds_;
  ProcFile statm_;
  std::string text_, error_;
  std::optional<uint64_t> max_fds_;
  std::optional<double> start_time_seconds_;  // once had, kept
  std::optional<std::chrono::steady_clock::time_point> limits_read_;
  // fd/ open, where it is procfs's (a captured root's is a plain folder, whose size is no
  // count): -1 until tried, -2 where it is not.
  int fd_dir_fd_ = -1;
};

// Once: a reader of its own. Nothing where /proc/self/stat cannot be read.
std::optional<SelfProcess> readSelfProcess(const std::filesystem::path& proc = "/proc");

// The parts of the text, for tests: /proc/self/stat's rss (pages) and vsize (bytes) and times,
// /proc/self/statm's size and resident (pages), "Max open files" of /proc/self/limits, btime of
// /proc/stat.
std::optional<SelfProcess> parseSelfStat(std::string_view stat, long ticks_per_second,
                                         long page_size);
// Virtual and resident bytes.
std::optional<std::pair<uint64_t, uint64_t>> parseStatm(std::string_view statm, long page_size);
std::optional<uint64_t> parseMaxOpenFiles(std::string_view limits);
std::optional<uint64_t> parseBootTime(std::string_view proc_stat);

}  // namespace stallwatch::collectors
