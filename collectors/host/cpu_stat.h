// /proc/stat's CPU lines: how busy the host's CPUs were over an interval, and how many there are.
// Source: Documentation/filesystems/proc.rst ("1.8 Miscellaneous kernel statistics"):
//   cpu  user nice system idle iowait irq softirq steal guest guest_nice   (all CPUs)
//   cpu0 ...                                                                (one line a CPU)
// in USER_HZ ticks; guest time is already counted in user. Older kernels print fewer columns
// (steal from 2.6.11, guest from 2.6.24): a missing column reads as 0. The bottleneck verdict
// asks whether a job's input pipeline could have more cores: busy cores against online ones.
#pragma once

#include <cstdint>
#include <filesystem>
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

// The root cgroup's cpu.stat (cgroup v2, Linux 5.8+): usage_usec, the user, nice, system, irq
// and softirq time of every CPU in µs, summed from the per-CPU counters /proc/stat prints. The
// busy time without steal for a fraction of /proc/stat's cost, which grows with the CPUs and
// interrupts (130 µs a read on 64 cores, 21 for cpu.stat). None when the line is missing or not
// a number.
std::optional<uint64_t> parseCgroupCpuUsage(std::string_view cpu_stat);

// Where the host's root cgroup's cpu.stat is: under the cgroup2 mount of ROOT, where that mount
// shows the whole hierarchy (a cgroup namespace's root, as in a container, has a cgroup.type the
// real root lacks, and its figures are the container's). None on a v1 host or a kernel before
// 5.8 (no cpu.stat at the root).
std::optional<std::filesystem::path> hostCpuStatPath(const SystemRoot& root);

// How often /proc/stat is read while cpu.stat gives the busy time (for the CPUs online and
// whether they count steal), and how many ticks without steal hand the busy time to cpu.stat.
inline constexpr int kSystemStatEveryTicks = 10;
// Steal below which the busy time stays with cpu.stat: one USER_HZ tick a second, /proc/stat's
// own resolution at a one-second interval. A cloud VM's CPUs may count a tick every few seconds
// (an H200 host: 1 in 10 s), which /proc/stat's busy figure cannot tell from none either.
inline constexpr double kNegligibleStealCores = 0.01;

// The host's busy cores, I/O-wait cores and CPUs online each tick. From /proc/stat every tick
// while its CPUs count more steal than kNegligibleStealCores (a VM whose hypervisor takes time:
// steal counts as busy, and only /proc/stat has it) or where there is no CPU_STAT (the root
// cgroup's cpu.stat); otherwise, once kSystemStatEveryTicks ticks passed without steal, the busy
// time from CPU_STAT, /proc/stat every kSystemStatEveryTicks ticks, and no I/O wait (the pressure
// collector's io figures say how long tasks waited on I/O, every tick).
std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root,
                                                std::optional<std::filesystem::path> cpu_stat);
std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
