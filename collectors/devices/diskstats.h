// /proc/diskstats: one line per block device with cumulative I/O counters.
// Source: Documentation/admin-guide/iostats.rst. After major, minor and name come 11 fields
// (kernels before 4.18), 15 (4.18+, discards) or 17 (5.5+, flushes). Counts of I/Os and
// sectors are unsigned long; the millisecond fields (time reading, writing, io_ticks,
// weighted time, discard and flush time) are printed as 32-bit unsigned ints and wrap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

inline constexpr uint64_t kSectorBytes = 512;  // diskstats counts 512-byte sectors always

struct DiskStats {
  uint32_t major = 0;
  uint32_t minor = 0;
  std::string name;
  uint64_t reads_completed = 0;
  uint64_t reads_merged = 0;
  uint64_t read_sectors = 0;
  uint64_t read_time_ms = 0;
  uint64_t writes_completed = 0;
  uint64_t writes_merged = 0;
  uint64_t write_sectors = 0;
  uint64_t write_time_ms = 0;
  uint64_t in_flight = 0;
  uint64_t io_ticks_ms = 0;
  uint64_t weighted_io_time_ms = 0;
  // Kernels 4.18+.
  std::optional<uint64_t> discards_completed;
  std::optional<uint64_t> discards_merged;
  std::optional<uint64_t> discard_sectors;
  std::optional<uint64_t> discard_time_ms;
  // Kernels 5.5+.
  std::optional<uint64_t> flushes_completed;
  std::optional<uint64_t> flush_time_ms;
};

struct DiskstatsParse {
  std::vector<DiskStats> devices;
  std::vector<ParseProblem> skipped;  // malformed lines, each named with the reason
};

// Pure: parses the text of /proc/diskstats. Malformed lines are skipped and reported.
DiskstatsParse parseDiskstats(std::string_view text);
// The same into OUT, reusing its memory (the collector calls this every tick).
void parseDiskstats(std::string_view text, DiskstatsParse& out);

// One device's counters from its sysfs stat (/sys/class/block/NAME/stat: a diskstats line without
// major, minor and name) into INTO's counters; false where the text is not one.
bool parseDeviceStat(std::string_view text, DiskStats& into);

// The collector: iostat's figures per device each tick, from ROOT/proc/diskstats or, where three
// quarters of its devices or more never did any I/O, from the used devices'
// ROOT/sys/class/block/NAME/stat between readings of the list.
std::unique_ptr<Collector> makeDiskstatsCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
