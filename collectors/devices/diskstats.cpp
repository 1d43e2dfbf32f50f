#include "collectors/devices/diskstats.h"

#include "collectors/counter_rates.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kFieldsPre418 = 14;  // major minor name + 11 counters
constexpr size_t kFields418 = 18;     // + discards completed, merged, sectors, ms
constexpr size_t kFields55 = 20;      // + flushes completed, ms
constexpr size_t kMaxFields = kFields55;

std::string describeWidth(size_t count) {
  if (count > kMaxFields) return "more than " + std::to_string(kMaxFields) + " fields";
  return std::to_string(count) + " fields";
}

}  // namespace

DiskstatsParse parseDiskstats(std::string_view text) {
  DiskstatsParse result;
  parseDiskstats(text, result);
  return result;
}

void parseDiskstats(std::string_view text, DiskstatsParse& result) {
  size_t used = 0;  // devices filled so far; entries beyond are kept for their memory
  result.skipped.clear();
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    std::string_view f[kMaxFields];
    const size_t count = splitFields(line, f);
    if (count == 0) return;  // blank line
    if (count != kFieldsPre418 && count != kFields418 && count != kFields55) {
      result.skipped.push_back(
          {line_number, "expected 14, 18 or 20 fields (kernel <4.18, 4.18+, 5.5+), found " +
                            describeWidth(count)});
      return;
    }
    uint64_t v[kMaxFields] = {};
    for (size_t i = 0; i < count; ++i) {
      if (i == 2) continue;  // the device name
      const auto parsed = parseUnsigned(f[i]);
      if (!parsed) {
        result.skipped.push_back({line_number, "field " + std::to_string(i + 1) + " '" +
                                                   std::string(f[i]) +
                                                   "' is not an unsigned integer"});
        return;
      }
      v[i] = *parsed;
    }
    if (v[0] > UINT32_MAX || v[1] > UINT32_MAX) {
      result.skipped.push_back({line_number, "major or minor number out of range"});
      return;
    }
    if (used == result.devices.size()) result.devices.emplace_back();
    DiskStats& d = result.devices[used++];
    d.major = static_cast<uint32_t>(v[0]);
    d.minor = static_cast<uint32_t>(v[1]);
    d.name.assign(f[2]);
    d.reads_completed = v[3];
    d.reads_merged = v[4];
    d.read_sectors = v[5];
    d.read_time_ms = v[6];
    d.writes_completed = v[7];
    d.writes_merged = v[8];
    d.write_sectors = v[9];
    d.write_time_ms = v[10];
    d.in_flight = v[11];
    d.io_ticks_ms = v[12];
    d.weighted_io_time_ms = v[13];
    const bool discards = count >= kFields418;
    const bool flushes = count >= kFields55;
    d.discards_completed = discards ? std::optional<uint64_t>(v[14]) : std::nullopt;
    d.discards_merged = discards ? std::optional<uint64_t>(v[15]) : std::nullopt;
    d.discard_sectors = discards ? std::optional<uint64_t>(v[16]) : std::nullopt;
    d.discard_time_ms = discards ? std::optional<uint64_t>(v[17]) : std::nullopt;
    d.flushes_completed = flushes ? std::optional<uint64_t>(v[18]) : std::nullopt;
    d.flush_time_ms = flushes ? std::optional<uint64_t>(v[19]) : std::nullopt;
  });
  result.devices.resize(used);
}

namespace {

bool neverUsed(const DiskStats& d) {
  return d.reads_completed == 0 && d.writes_completed == 0 && d.in_flight == 0 &&
         d.io_ticks_ms == 0 && d.discards_completed.value_or(0) == 0 &&
         d.flushes_completed.value_or(0) == 0;
}

class DiskstatsCollector final : public Collector {
 public:
  explicit DiskstatsCollector(const SystemRoot& root) : file_(root.proc / "diskstats") {}

  std::string_view name() const override { return "diskstats"; }

  CollectResult collect(const Tick& tick, SampleBatch& out) override {
    std::string error;
    if (!file_.read(buffer_, error)) {
      primed_ = false;
      return CollectResult::error(error);
    }
    parseDiskstats(buffer_, current_);
    const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
    if (primed_) {
      out.disks.reserve(out.disks.size() + current_.devices.size());
      for (size_t i = 0; i < current_.devices.size(); ++i) {
        const DiskStats& d = current_.devices[i];
        // A device that never did any I/O since boot (a loop device with nothing attached,
        // an empty card reader) has nothing to say: no rows, no metric series.
        if (neverUsed(d)) continue;
        const DiskStats* prev = previousOf(d, i);
        if (!prev) continue;  // a device that just appeared: rates from the next tick on
        auto result = computeDiskRates(*prev, d, elapsed);
        if (!result.rates) continue;
        constexpr uint64_t kSector = 512;  // /proc/diskstats counts 512-byte sectors
        const DiskTotals totals{d.reads_completed,  d.read_sectors * kSector,  d.read_time_ms,
                                d.writes_completed, d.write_sectors * kSector, d.write_time_ms,
                                d.io_ticks_ms,      d.weighted_io_time_ms};
        out.disks.push_back(
            {d.name, d.major, d.minor, *result.rates, d.in_flight, totals, std::nullopt});
      }
    }
    std::swap(previous_, current_);
    last_tick_ns_ = tick.monotonic_ns;
    const bool was_primed = primed_;
    primed_ = true;
    const DiskstatsParse& parsed = previous_;
    if (parsed.devices.empty() && !parsed.skipped.empty()) {
      return CollectResult::error(describe(parsed.skipped.front()));
    }
    CollectResult result = CollectResult::data(parsed.skipped.size());
    if (!parsed.skipped.empty()) result.message = describe(parsed.skipped.front());
    if (!was_primed) result.outcome = Outcome::kNoData;
    return result;
  }

 private:
  // The kernel lists devices in a stable order, so the previous reading of device I is
  // almost always at index I; search only when devices came or went.
  const DiskStats* previousOf(const DiskStats& d, size_t index) const {
    auto same = [&](const DiskStats& p) {
      return p.major == d.major && p.minor == d.minor && p.name == d.name;
    };
    const auto& prev = previous_.devices;
    if (index < prev.size() && same(prev[index])) return &prev[index];
    for (const auto& p : prev) {
      if (same(p)) return &p;
    }
    return nullptr;
  }

  std::string describe(const ParseProblem& problem) const {
    return file_.path().string() + " line " + std::to_string(problem.line) + ": " + problem.message;
  }

  ProcFile file_;
  std::string buffer_;
  DiskstatsParse current_;
  DiskstatsParse previous_;
  int64_t last_tick_ns_ = 0;
  bool primed_ = false;
};

}  // namespace

std::unique_ptr<Collector> makeDiskstatsCollector(const SystemRoot& root) {
  return std::make_unique<DiskstatsCollector>(root);
}

}  // namespace stallwatch::collectors
