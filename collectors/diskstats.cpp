#include "collectors/diskstats.h"

#include <map>
#include <tuple>

#include "collectors/proc_file.h"
#include "collectors/text_scan.h"
#include "correlator/counter_rates.h"

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
    DiskStats d;
    d.major = static_cast<uint32_t>(v[0]);
    d.minor = static_cast<uint32_t>(v[1]);
    d.name = std::string(f[2]);
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
    if (count >= kFields418) {
      d.discards_completed = v[14];
      d.discards_merged = v[15];
      d.discard_sectors = v[16];
      d.discard_time_ms = v[17];
    }
    if (count >= kFields55) {
      d.flushes_completed = v[18];
      d.flush_time_ms = v[19];
    }
    result.devices.push_back(std::move(d));
  });
  return result;
}

namespace {

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
    DiskstatsParse parsed = parseDiskstats(buffer_);
    const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
    std::map<Key, DiskStats> current;
    for (DiskStats& d : parsed.devices) {
      Key key{d.major, d.minor, d.name};
      if (primed_) {
        auto prev = previous_.find(key);
        if (prev != previous_.end()) {
          auto result = correlator::computeDiskRates(prev->second, d, elapsed);
          if (result.rates) {
            out.disks.push_back({d.name, d.major, d.minor, *result.rates, d.in_flight});
          }
        }
      }
      current.emplace(std::move(key), std::move(d));
    }
    previous_ = std::move(current);
    last_tick_ns_ = tick.monotonic_ns;
    const bool was_primed = primed_;
    primed_ = true;
    if (parsed.devices.empty() && !parsed.skipped.empty()) {
      return CollectResult::error(file_.path().string() + " line " +
                                  std::to_string(parsed.skipped.front().line) + ": " +
                                  parsed.skipped.front().message);
    }
    CollectResult result = CollectResult::data(parsed.skipped.size());
    if (!parsed.skipped.empty()) {
      result.message = file_.path().string() + " line " +
                       std::to_string(parsed.skipped.front().line) + ": " +
                       parsed.skipped.front().message;
    }
    if (!was_primed) result.outcome = Outcome::kNoData;
    return result;
  }

 private:
  using Key = std::tuple<uint32_t, uint32_t, std::string>;
  ProcFile file_;
  std::string buffer_;
  std::map<Key, DiskStats> previous_;
  int64_t last_tick_ns_ = 0;
  bool primed_ = false;
};

}  // namespace

std::unique_ptr<Collector> makeDiskstatsCollector(const SystemRoot& root) {
  return std::make_unique<DiskstatsCollector>(root);
}

}  // namespace stallwatch::collectors
