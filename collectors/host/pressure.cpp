#include "collectors/host/pressure.h"

#include <array>
#include <cerrno>

#include "collectors/counter_rates.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kPressureFields = 5;  // kind avg10= avg60= avg300= total=

// Parses "key=value" where key must match.
bool keyValue(std::string_view token, std::string_view key, std::string_view& value) {
  if (token.size() <= key.size() || token.substr(0, key.size()) != key ||
      token[key.size()] != '=') {
    return false;
  }
  value = token.substr(key.size() + 1);
  return true;
}

}  // namespace

PressureParse parsePressure(std::string_view text) {
  PressureParse result;
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    std::string_view f[kPressureFields];
    const size_t count = splitFields(line, f);
    if (count == 0) return;
    auto skip = [&](std::string message) {
      result.skipped.push_back({line_number, std::move(message)});
    };
    if (count != kPressureFields) {
      skip("expected 'some|full avg10= avg60= avg300= total=', found " + std::to_string(count) +
           " fields");
      return;
    }
    std::optional<PressureLine>* target = nullptr;
    if (f[0] == "some") {
      target = &result.stats.some;
    } else if (f[0] == "full") {
      target = &result.stats.full;
    } else {
      skip("expected 'some' or 'full', found '" + std::string(f[0]) + "'");
      return;
    }
    static constexpr std::array<std::string_view, 3> kAvgKeys = {"avg10", "avg60", "avg300"};
    PressureLine parsed;
    double* avgs[3] = {&parsed.avg10, &parsed.avg60, &parsed.avg300};
    for (size_t i = 0; i < kAvgKeys.size(); ++i) {
      std::string_view value;
      std::optional<double> number;
      if (!keyValue(f[i + 1], kAvgKeys[i], value) || !(number = parseDouble(value))) {
        skip("expected " + std::string(kAvgKeys[i]) + "=<number>, found '" + std::string(f[i + 1]) +
             "'");
        return;
      }
      *avgs[i] = *number;
    }
    std::string_view total_text;
    std::optional<uint64_t> total;
    if (!keyValue(f[4], "total", total_text) || !(total = parseUnsigned(total_text))) {
      skip("expected total=<microseconds>, found '" + std::string(f[4]) + "'");
      return;
    }
    parsed.total_us = *total;
    *target = parsed;
  });
  return result;
}

namespace {

class PressureCollector final : public Collector {
 public:
  explicit PressureCollector(const SystemRoot& root)
      // The kernel writes each in one go (single_open): no read to find the end (issue 47).
      : resources_{
            Resource{
                "io", ProcFile(root.proc / "pressure" / "io", ProcFile::Shape::kOneRecord), {}},
            Resource{
                "cpu", ProcFile(root.proc / "pressure" / "cpu", ProcFile::Shape::kOneRecord), {}},
            Resource{"memory",
                     ProcFile(root.proc / "pressure" / "memory", ProcFile::Shape::kOneRecord),
                     {}}} {}

  std::string_view name() const override { return "pressure"; }

  CollectResult collect(const Tick& tick, SampleBatch& out) override {
    const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
    size_t readable = 0;
    uint64_t skipped = 0;
    std::string first_problem;
    for (Resource& r : resources_) {
      std::string error;
      if (!r.file.read(buffer_, error)) {
        r.previous.reset();
        if (first_problem.empty()) first_problem = error;
        continue;
      }
      PressureParse parsed = parsePressure(buffer_);
      skipped += parsed.skipped.size();
      if (!parsed.skipped.empty() && first_problem.empty()) {
        first_problem = r.file.path().string() + " line " +
                        std::to_string(parsed.skipped.front().line) + ": " +
                        parsed.skipped.front().message;
      }
      ++readable;
      if (r.previous && primed_) {
        PressureSample s;
        s.resource = r.name;
        if (r.previous->some && parsed.stats.some) {
          s.some_ratio =
              stallRatio(r.previous->some->total_us, parsed.stats.some->total_us, elapsed);
        }
        if (r.previous->full && parsed.stats.full) {
          s.full_ratio =
              stallRatio(r.previous->full->total_us, parsed.stats.full->total_us, elapsed);
        }
        if (parsed.stats.some) s.some_total_us = parsed.stats.some->total_us;
        if (parsed.stats.full) s.full_total_us = parsed.stats.full->total_us;
        out.pressure.push_back(std::move(s));
      }
      r.previous = parsed.stats;
    }
    last_tick_ns_ = tick.monotonic_ns;
    const bool was_primed = primed_;
    primed_ = true;
    if (readable == 0) {
      // No PSI: kernel older than 4.20, CONFIG_PSI off or booted with psi=0.
      return CollectResult::unavailableHere("pressure stall information unavailable: " +
                                            first_problem);
    }
    CollectResult result = CollectResult::data(skipped);
    result.message = first_problem;
    if (!was_primed) result.outcome = Outcome::kNoData;
    return result;
  }

 private:
  struct Resource {
    std::string name;
    ProcFile file;
    std::optional<PressureStats> previous;
  };
  std::array<Resource, 3> resources_;
  std::string buffer_;
  int64_t last_tick_ns_ = 0;
  bool primed_ = false;
};

}  // namespace

std::unique_ptr<Collector> makePressureCollector(const SystemRoot& root) {
  return std::make_unique<PressureCollector>(root);
}

}  // namespace stallwatch::collectors
