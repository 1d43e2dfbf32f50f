// /proc/stat's CPU lines: how busy the host's CPUs were over an interval, and how many there are.
// Source: Documentation/filesystems/proc.rst ("1.8 Miscellaneous kernel statistics"):
//   cpu  user nice system idle iowait irq softirq steal guest guest_nice   (all CPUs)
//   cpu0 ...                                                                (one line a CPU)
// in USER_HZ ticks; guest time is already counted in user. Older kernels print fewer columns
// (steal from 2.6.11, guest from 2.6.24): a missing column reads as 0. The bottleneck verdict
// asks whether a job's input pipeline could have more cores: busy cores against online ones.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

struct CpuTimes {
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  uint64_t total() const { return user + nice + system + idle + iowait + irq + softirq + steal; }
  // Time the CPUs were not free to run more work: everything but idle and iowait (iowait is
  // idle time with I/O outstanding; a runnable task would have had the CPU). Steal counts as
  // busy: the hypervisor took it.
  uint64_t busy() const { return user + nice + system + irq + softirq + steal; }
};

struct SystemStatParse {
  std::optional<CpuTimes> all;  // the "cpu" line
  uint32_t cpus = 0;            // "cpuN" lines: the online CPUs
  std::vector<ParseProblem> skipped;
};

// Pure: parses /proc/stat's text (lines other than cpu* are ignored).
SystemStatParse parseSystemStat(std::string_view text);

// Busy and I/O-wait cores over an interval from two readings of the "cpu" line, CPUS online.
// None when no ticks elapsed or a counter went backwards.
std::optional<CpuSample> cpuSample(const CpuTimes& previous, const CpuTimes& current,
                                   uint32_t cpus);

std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
