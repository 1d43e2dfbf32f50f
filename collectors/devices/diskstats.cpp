#include "collectors/devices/diskstats.h"

#include <algorithm>

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

namespace {

// One pass over a line: fields split and numbers read together, where splitting first and then
// reading each number walked every byte twice (issue 47: /proc/diskstats is the tick's largest
// text, a line a device and partition). Field NAME_AT is the device name (kNoName: none, as in a
// device's sysfs stat); the numbers go to V at their field's index. False at anything unusual (a
// byte not a digit, a number past 64 bits, more than MAX fields): the careful path then says what.
constexpr size_t kNoName = SIZE_MAX;
bool scanLine(std::string_view line, uint64_t* v, size_t max, size_t name_at,
              std::string_view& name, size_t& count) {
  const char* p = line.data();
  const char* const end = p + line.size();
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n'; };
  count = 0;
  while (true) {
    while (p < end && blank(*p)) ++p;
    if (p == end) return true;
    if (count == max) return false;
    const char* const start = p;
    if (count == name_at) {
      while (p < end && !blank(*p)) ++p;
      name = std::string_view(start, static_cast<size_t>(p - start));
      ++count;
      continue;
    }
    uint64_t x = 0;
    for (; p < end && !blank(*p); ++p) {
      const auto digit = static_cast<uint64_t>(static_cast<unsigned char>(*p) - '0');
      if (digit > 9 || __builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, digit, &x))
        return false;
    }
    v[count++] = x;
  }
}

bool knownWidth(size_t count) {
  return count == kFieldsPre418 || count == kFields418 || count == kFields55;
}

// V's counters (COUNT fields of a /proc/diskstats line: 14, 18 or 20) into D.
void fillCounters(const uint64_t (&v)[kMaxFields], size_t count, DiskStats& d) {
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
}

// The same line read field by field, for its problem: false with it in SKIPPED, or true with the
// numbers where it has none after all.
bool carefulLine(std::string_view line, size_t line_number, uint64_t (&v)[kMaxFields],
                 std::string_view& name, size_t& count, std::vector<ParseProblem>& skipped) {
  std::string_view f[kMaxFields];
  count = splitFields(line, f);
  if (count == 0) return true;  // blank line
  if (!knownWidth(count)) {
    skipped.push_back(
        {line_number, "expected 14, 18 or 20 fields (kernel <4.18, 4.18+, 5.5+), found " +
                          describeWidth(count)});
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    if (i == 2) continue;  // the device name
    const auto parsed = parseUnsigned(f[i]);
    if (!parsed) {
      skipped.push_back({line_number, "field " + std::to_string(i + 1) + " '" + std::string(f[i]) +
                                          "' is not an unsigned integer"});
      return false;
    }
    v[i] = *parsed;
  }
  name = f[2];
  return true;
}

}  // namespace

void parseDiskstats(std::string_view text, DiskstatsParse& result) {
  size_t used = 0;  // devices filled so far; entries beyond are kept for their memory
  result.skipped.clear();
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    uint64_t v[kMaxFields] = {};
    std::string_view name;
    size_t count = 0;
    const bool plain =
        scanLine(line, v, kMaxFields, 2, name, count) && (count == 0 || knownWidth(count));
    if (!plain && !carefulLine(line, line_number, v, name, count, result.skipped)) return;
    if (count == 0) return;  // blank line
    if (v[0] > UINT32_MAX || v[1] > UINT32_MAX) {
      result.skipped.push_back({line_number, "major or minor number out of range"});
      return;
    }
    if (used == result.devices.size()) result.devices.emplace_back();
    DiskStats& d = result.devices[used++];
    d.major = static_cast<uint32_t>(v[0]);
    d.minor = static_cast<uint32_t>(v[1]);
    d.name.assign(name);
    fillCounters(v, count, d);
  });
  result.devices.resize(used);
}

bool parseDeviceStat(std::string_view text, DiskStats& into) {
  uint64_t v[kMaxFields] = {};
  std::string_view none;
  size_t count = 0;
  // A device's stat is a diskstats line without its first three fields.
  if (!scanLine(text, v + 3, kMaxFields - 3, kNoName, none, count) || !knownWidth(count + 3))
    return false;
  fillCounters(v, count + 3, into);
  return true;
}

namespace {

bool neverUsed(const DiskStats& d) {
  return d.reads_completed == 0 && d.writes_completed == 0 && d.in_flight == 0 &&
         d.io_ticks_ms == 0 && d.discards_completed.value_or(0) == 0 &&
         d.flushes_completed.value_or(0) == 0;
}

// The used devices' own stat files instead of the whole list: where three quarters of the
// kernel's devices or more never did any I/O (loop devices with nothing attached, zram, ram
// disks), the kernel still sums every CPU's counters of each of them for every read of
// /proc/diskstats (issue 47, an H200 host: 2 of 11 devices used, 32 us a tick for the list, 13
// for the two files; a file costs two lines of the list there, four on a 2-core VM). The list is
// read again every kWholeListEveryTicks ticks, at once when the device tree changes and whenever a
// device's file fails: a device that starts its first I/O is seen then, its first rate over the
// time since the list last showed it idle.
constexpr uint64_t kWholeListEveryTicks = 10;

class DiskstatsCollector final : public Collector {
 public:
  explicit DiskstatsCollector(const SystemRoot& root)
      : file_(root.proc / "diskstats"), class_block_(root.sys / "class" / "block") {}

  std::string_view name() const override { return "diskstats"; }
  // Only to hear of a change: a device that came or a mount that may use one.
  bool wantsDeviceTree() const override { return true; }
  void setDeviceTree(const std::shared_ptr<const DeviceTree>& /*tree*/) override {
    list_due_ = true;
  }

  CollectResult collect(const Tick& tick, SampleBatch& out) override {
    const bool from_files = !list_due_ && !watched_.empty() &&
                            ticks_since_list_ + 1 < kWholeListEveryTicks && readWatched();
    if (!from_files) {
      std::string error;
      if (!file_.read(buffer_, error)) {
        primed_ = false;
        watched_.clear();
        return CollectResult::error(error);
      }
      parseDiskstats(buffer_, current_);
    }
    const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
    if (primed_) emitRates(tick, elapsed, out);
    std::swap(previous_, current_);
    last_tick_ns_ = tick.monotonic_ns;
    const bool was_primed = primed_;
    primed_ = true;
    if (from_files) {
      ++ticks_since_list_;
      ++ticks_from_files_;
      return CollectResult::data();
    }
    ++ticks_from_list_;
    listed_ = previous_.devices.size();
    watch(previous_);
    // Kept only while the files are read: where the list is read every tick, the previous
    // reading is it.
    if (watched_.empty()) {
      last_list_.devices.clear();
    } else {
      last_list_ = previous_;
      last_list_ns_ = tick.monotonic_ns;
    }
    const DiskstatsParse& parsed = previous_;
    if (parsed.devices.empty() && !parsed.skipped.empty()) {
      return CollectResult::error(describe(parsed.skipped.front()));
    }
    CollectResult result = CollectResult::data(parsed.skipped.size());
    if (!parsed.skipped.empty()) result.message = describe(parsed.skipped.front());
    if (!was_primed) result.outcome = Outcome::kNoData;
    return result;
  }

  std::string finalReport() const override {
    if (ticks_from_files_ == 0) return {};
    return "diskstats: " + std::to_string(ticks_from_files_) +
           " ticks from the used devices' stat files (" + std::to_string(watched_.size()) + " of " +
           std::to_string(listed_) + " devices at the end), " + std::to_string(ticks_from_list_) +
           " from " + file_.path().string();
  }

 private:
  struct Watched {
    uint32_t major, minor;
    std::string name;
    ProcFile file;
  };

  void emitRates(const Tick& tick, double elapsed, SampleBatch& out) const {
    out.disks.reserve(out.disks.size() + current_.devices.size());
    for (size_t i = 0; i < current_.devices.size(); ++i) {
      const DiskStats& d = current_.devices[i];
      // A device that never did any I/O since boot (a loop device with nothing attached, an
      // empty card reader) has nothing to say: no rows, no metric series.
      if (neverUsed(d)) continue;
      double over = elapsed;
      const DiskStats* prev = previousOf(previous_, d, i);
      if (!prev && (prev = previousOf(last_list_, d, i))) {
        // Idle when the list last showed it, read from its file only from now on.
        over = static_cast<double>(tick.monotonic_ns - last_list_ns_) / 1e9;
      }
      if (!prev) continue;  // a device that just appeared: rates from the next tick on
      auto result = computeDiskRates(*prev, d, over);
      if (!result.rates) continue;
      constexpr uint64_t kSector = 512;  // /proc/diskstats counts 512-byte sectors
      const DiskTotals totals{d.reads_completed,  d.read_sectors * kSector,  d.read_time_ms,
                              d.writes_completed, d.write_sectors * kSector, d.write_time_ms,
                              d.io_ticks_ms,      d.weighted_io_time_ms};
      out.disks.push_back(
          {d.name, d.major, d.minor, *result.rates, d.in_flight, totals, std::nullopt});
    }
  }

  // After a reading of the whole list: its used devices' files, where a quarter of the devices or
  // fewer are used and every used one has its file; none otherwise.
  void watch(const DiskstatsParse& list) {
    list_due_ = false;
    ticks_since_list_ = 0;
    watched_.clear();
    // Where a file was missing, tried again only every so often: not a failed open a tick.
    if (lists_until_watch_ > 0) {
      --lists_until_watch_;
      return;
    }
    std::vector<size_t> used;
    for (size_t i = 0; i < list.devices.size(); ++i)
      if (!neverUsed(list.devices[i])) used.push_back(i);
    if (used.empty() || used.size() * 4 > list.devices.size()) return;
    for (const size_t i : used) {
      const DiskStats& d = list.devices[i];
      std::string in_sysfs = d.name;
      std::replace(in_sysfs.begin(), in_sysfs.end(), '/', '!');  // as sysfs names cciss/c0d0
      Watched w{d.major, d.minor, d.name,
                ProcFile(class_block_ / in_sysfs / "stat", ProcFile::Shape::kOneRecord)};
      std::string error;
      DiskStats readable;
      if (!w.file.read(buffer_, error) || !parseDeviceStat(buffer_, readable)) {
        watched_.clear();  // a file that is not there (an older kernel, a captured root)
        lists_until_watch_ = kWholeListEveryTicks;
        return;
      }
      watched_.push_back(std::move(w));
    }
  }

  // The watched devices' counters into current_; false where a file failed (a device removed):
  // the list is read instead.
  bool readWatched() {
    current_.skipped.clear();
    current_.devices.resize(watched_.size());
    for (size_t i = 0; i < watched_.size(); ++i) {
      Watched& w = watched_[i];
      DiskStats& d = current_.devices[i];
      std::string error;
      if (!w.file.read(buffer_, error) || !parseDeviceStat(buffer_, d)) return false;
      d.major = w.major;
      d.minor = w.minor;
      d.name = w.name;
    }
    return true;
  }

  // The kernel lists devices in a stable order, so the previous reading of device I is
  // almost always at index I; search only when devices came or went.
  static const DiskStats* previousOf(const DiskstatsParse& before, const DiskStats& d,
                                     size_t index) {
    auto same = [&](const DiskStats& p) {
      return p.major == d.major && p.minor == d.minor && p.name == d.name;
    };
    const auto& prev = before.devices;
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
  std::filesystem::path class_block_;
  std::string buffer_;
  DiskstatsParse current_;
  DiskstatsParse previous_;
  DiskstatsParse last_list_;  // the last reading of the whole list, while files are read
  size_t listed_ = 0;         // the devices it had
  std::vector<Watched> watched_;
  int64_t last_tick_ns_ = 0;
  int64_t last_list_ns_ = 0;
  uint64_t ticks_since_list_ = 0;
  uint64_t ticks_from_files_ = 0;
  uint64_t ticks_from_list_ = 0;
  uint64_t lists_until_watch_ = 0;
  bool list_due_ = true;
  bool primed_ = false;
};

}  // namespace

std::unique_ptr<Collector> makeDiskstatsCollector(const SystemRoot& root) {
  return std::make_unique<DiskstatsCollector>(root);
}

}  // namespace stallwatch::collectors
