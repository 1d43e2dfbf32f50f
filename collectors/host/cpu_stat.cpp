#include "collectors/host/cpu_stat.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "collectors/devices/mountinfo.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kMaxCpuFields = 12;  // "cpu" and 10 counters, and one more to tell too many
constexpr size_t kMinCpuFields = 5;   // "cpu user nice system idle": the oldest layout

}  // namespace

SystemStatParse parseSystemStat(std::string_view text) {
  SystemStatParse result;
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    if (line.substr(0, 3) != "cpu") return;
    std::string_view f[kMaxCpuFields];
    const size_t count = std::min(splitFields(line, f), kMaxCpuFields);
    if (count < kMinCpuFields) {
      result.skipped.push_back({line_number, "expected 'cpu[N] user nice system idle ...', found " +
                                                 std::to_string(count) + " fields"});
      return;
    }
    uint64_t v[8] = {};
    for (size_t i = 1; i < count && i <= 8; ++i) {
      const auto n = parseUnsigned(f[i]);
      if (!n) {
        result.skipped.push_back({line_number, "expected a tick count in column " +
                                                   std::to_string(i + 1) + ", found '" +
                                                   std::string(f[i]) + "'"});
        return;
      }
      v[i - 1] = *n;
    }
    if (f[0] == "cpu") {
      result.all = CpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    } else if (parseUnsigned(f[0].substr(3))) {
      ++result.cpus;
    }
  });
  return result;
}

std::optional<CpuSample> cpuSample(const CpuTimes& previous, const CpuTimes& current,
                                   uint32_t cpus) {
  if (current.total() <= previous.total() || current.busy() < previous.busy() ||
      current.iowait < previous.iowait || cpus == 0) {
    return std::nullopt;
  }
  const double total = static_cast<double>(current.total() - previous.total());
  CpuSample s;
  s.online_cpus = cpus;
  s.busy_cores = static_cast<double>(current.busy() - previous.busy()) / total * cpus;
  s.iowait_cores = static_cast<double>(current.iowait - previous.iowait) / total * cpus;
  return s;
}

std::optional<uint64_t> parseCgroupCpuUsage(std::string_view cpu_stat) {
  std::optional<uint64_t> usage;
  forEachLine(cpu_stat, [&](std::string_view line, size_t) {
    std::string_view f[3];
    if (splitFields(line, f) == 2 && f[0] == "usage_usec") usage = parseUnsigned(f[1]);
  });
  return usage;
}

std::optional<std::filesystem::path> hostCpuStatPath(const SystemRoot& root) {
  const auto mounts = readMountinfo(root);
  if (!mounts) return std::nullopt;
  for (const MountInfo& m : mounts->mounts) {
    if (m.fs_type != "cgroup2" || m.root != "/") continue;
    const auto dir = mountPointUnder(root, m.mount_point);
    std::error_code ec;
    if (!dir || std::filesystem::exists(*dir / "cgroup.type", ec) ||
        !std::filesystem::exists(*dir / "cpu.stat", ec))
      return std::nullopt;
    return *dir / "cpu.stat";
  }
  return std::nullopt;
}

namespace {

// The cores' worth of steal between two readings of CPUS online (0 when none elapsed).
double stealCores(const CpuTimes& before, const CpuTimes& after, uint32_t cpus) {
  if (after.steal <= before.steal || after.total() <= before.total()) return 0;
  return static_cast<double>(after.steal - before.steal) /
         static_cast<double>(after.total() - before.total()) * cpus;
}

class CpuStatCollector final : public Collector {
 public:
  // The kernel writes both in one go (single_open_size): no read to find the end (issue 47).
  CpuStatCollector(const SystemRoot& root, std::optional<std::filesystem::path> cpu_stat)
      : stat_(root.proc / "stat", ProcFile::Shape::kOneRecord) {
    if (cpu_stat) usage_.emplace(std::move(*cpu_stat), ProcFile::Shape::kOneRecord);
  }
  std::string_view name() const override { return "cpu"; }

  CollectResult collect(const Tick& tick, SampleBatch& out) override {
    if (usage_ && from_usage_) {
      if (auto result = collectFromUsage(tick, out)) return std::move(*result);
    }
    return collectFromStat(tick, out);
  }

  std::string finalReport() const override {
    return fmt::format(
        "cpu: busy time from the root cgroup's cpu.stat at {} ticks, from /proc/stat at "
        "{} ({} reads of it)",
        usage_ticks_, stat_ticks_, stat_reads_);
  }

 private:
  // /proc/stat into PARSED; an outcome other than data when it cannot be read or has no cpu line.
  CollectResult readSystemStat(SystemStatParse& parsed) {
    std::string error;
    ++stat_reads_;
    if (!stat_.read(buffer_, error)) {
      previous_.reset();
      return CollectResult::unavailableHere("host CPU figures unavailable: " + error);
    }
    parsed = parseSystemStat(buffer_);
    if (!parsed.all) {
      previous_.reset();
      return CollectResult::error(stat_.path().string() + ": no 'cpu' line");
    }
    CollectResult result = CollectResult::data(parsed.skipped.size());
    if (!parsed.skipped.empty()) {
      result.message = stat_.path().string() + " line " +
                       std::to_string(parsed.skipped.front().line) + ": " +
                       parsed.skipped.front().message;
    }
    return result;
  }

  // Reads cpu.stat's usage now, so that the next tick's busy time can come from it; false
  // (and cpu.stat given up, saying why once) when it cannot serve. Then /proc/stat primes
  // again: its last reading may be ticks old, and a tick's figure is that tick's.
  bool readUsage(const Tick& tick) {
    std::string error;
    if (!usage_->read(usage_text_, error)) {
      notice_ = error + "; busy time from /proc/stat";
    } else if (const auto usage = parseCgroupCpuUsage(usage_text_)) {
      usage_us_ = *usage;
      usage_at_ns_ = tick.monotonic_ns;
      return true;
    } else {
      notice_ = usage_->path().string() + ": no usage_usec line; busy time from /proc/stat";
    }
    usage_.reset();
    from_usage_ = false;
    previous_.reset();
    return false;
  }

  // A tick from /proc/stat alone: the first ticks, a host without cpu.stat, CPUs that count
  // steal. After kSystemStatEveryTicks ticks without steal past kNegligibleStealCores, cpu.stat
  // from the next tick.
  CollectResult collectFromStat(const Tick& tick, SampleBatch& out) {
    ++stat_ticks_;
    SystemStatParse parsed;
    CollectResult result = readSystemStat(parsed);
    result.notice = std::exchange(notice_, {});
    if (result.outcome != Outcome::kData) return result;
    if (previous_) {
      out.cpu = cpuSample(*previous_, *parsed.all, parsed.cpus);
      ticks_without_steal_ =
          stealCores(*previous_, *parsed.all, parsed.cpus) <= kNegligibleStealCores
              ? ticks_without_steal_ + 1
              : 0;
    } else {
      result.outcome = Outcome::kNoData;  // the first reading only primes the counters
    }
    previous_ = parsed.all;
    cpus_ = parsed.cpus;
    if (usage_ && ticks_without_steal_ >= kSystemStatEveryTicks && readUsage(tick)) {
      from_usage_ = true;
      since_stat_ = 0;
    }
    return result;
  }

  // A tick's busy time from cpu.stat over the time between ticks (the reads come at the same
  // point of each tick, within the collectors' run of a few hundred µs), /proc/stat read every
  // kSystemStatEveryTicks ticks for the CPUs online and whether they counted steal. No I/O wait:
  // only /proc/stat has it, and a window's mean is not each tick's. A window that counted more
  // steal than kNegligibleStealCores hands the next ticks back to /proc/stat; its last tick gets
  // the window's mean steal, the ones before it none (at most kSystemStatEveryTicks - 1, as steal
  // starts). None once cpu.stat cannot serve.
  std::optional<CollectResult> collectFromUsage(const Tick& tick, SampleBatch& out) {
    const uint64_t before = usage_us_;
    const int64_t before_ns = usage_at_ns_;
    if (!readUsage(tick)) return std::nullopt;
    ++usage_ticks_;
    CollectResult result = CollectResult::data();
    double steal_cores = 0;
    if (++since_stat_ >= kSystemStatEveryTicks) {
      SystemStatParse parsed;
      result = readSystemStat(parsed);
      if (result.outcome != Outcome::kData) return result;
      if (previous_) {
        if (const double steal = stealCores(*previous_, *parsed.all, parsed.cpus);
            steal > kNegligibleStealCores) {
          steal_cores = steal;
          from_usage_ = false;  // /proc/stat every tick while the CPUs count steal
          ticks_without_steal_ = 0;
        }
      }
      previous_ = parsed.all;
      cpus_ = parsed.cpus;
      since_stat_ = 0;
    }
    if (usage_us_ < before || usage_at_ns_ <= before_ns || cpus_ == 0) return result;
    CpuSample s;
    s.online_cpus = cpus_;
    s.busy_cores = std::min(static_cast<double>(usage_us_ - before) * 1000.0 /
                                    static_cast<double>(usage_at_ns_ - before_ns) +
                                steal_cores,
                            static_cast<double>(cpus_));
    out.cpu = s;
    return result;
  }

  ProcFile stat_;
  std::string buffer_;
  std::optional<CpuTimes> previous_;  // /proc/stat's last reading
  uint32_t cpus_ = 0;                 // online, at its last reading
  int ticks_without_steal_ = 0;
  // cpu.stat while it can serve; whether it serves now, its last usage_usec and when.
  std::optional<ProcFile> usage_;
  bool from_usage_ = false;
  std::string usage_text_;
  uint64_t usage_us_ = 0;
  int64_t usage_at_ns_ = 0;
  int since_stat_ = 0;  // ticks since /proc/stat was read
  uint64_t usage_ticks_ = 0, stat_ticks_ = 0, stat_reads_ = 0;
  std::string notice_;  // why cpu.stat was given up, said with the next result
};

}  // namespace

std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root,
                                                std::optional<std::filesystem::path> cpu_stat) {
  return std::make_unique<CpuStatCollector>(root, std::move(cpu_stat));
}

std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root) {
  return makeCpuStatCollector(root, hostCpuStatPath(root));
}

}  // namespace stallwatch::collectors
