#include "collectors/host/cpu_stat.h"

#include <algorithm>

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

namespace {

class CpuStatCollector final : public Collector {
 public:
  // The kernel writes it in one go (single_open_size): no read to find the end (issue 47).
  explicit CpuStatCollector(const SystemRoot& root)
      : file_(root.proc / "stat", ProcFile::Shape::kOneRecord) {}
  std::string_view name() const override { return "cpu"; }

  CollectResult collect(const Tick&, SampleBatch& out) override {
    std::string error;
    if (!file_.read(buffer_, error)) {
      previous_.reset();
      return CollectResult::unavailableHere("host CPU figures unavailable: " + error);
    }
    SystemStatParse parsed = parseSystemStat(buffer_);
    if (!parsed.all) {
      previous_.reset();
      return CollectResult::error(file_.path().string() + ": no 'cpu' line");
    }
    CollectResult result = CollectResult::data(parsed.skipped.size());
    if (!parsed.skipped.empty()) {
      result.message = file_.path().string() + " line " +
                       std::to_string(parsed.skipped.front().line) + ": " +
                       parsed.skipped.front().message;
    }
    if (previous_) {
      out.cpu = cpuSample(*previous_, *parsed.all, parsed.cpus);
    } else {
      result.outcome = Outcome::kNoData;  // the first reading only primes the counters
    }
    previous_ = parsed.all;
    return result;
  }

 private:
  ProcFile file_;
  std::string buffer_;
  std::optional<CpuTimes> previous_;
};

}  // namespace

std::unique_ptr<Collector> makeCpuStatCollector(const SystemRoot& root) {
  return std::make_unique<CpuStatCollector>(root);
}

}  // namespace stallwatch::collectors
