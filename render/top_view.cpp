#include "render/top_view.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/text.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

using model::DeviceSeries;
using model::JobSeries;
using model::Series;

constexpr size_t kFigureIntervals = 5;  // the figures: over the last 5 intervals

std::optional<double> meanOf(const Series& x) {
  double sum = 0;
  size_t n = 0;
  for (const auto& v : x) {
    if (v) {
      sum += *v;
      ++n;
    }
  }
  return n ? std::optional<double>(sum / static_cast<double>(n)) : std::nullopt;
}

// The loop's share of its time spent waiting for data over the window: the wait over the wait
// and the step, as `jobs` and /metrics' stallwatch_job_data_wait_ratio give it. Not over the
// window's seconds: a wait is reported with the step that ends it, so a 3 s wait can land in
// one interval (top said "data wait 126 %" of a job starved by its disk).
std::optional<double> waitShare(const Series& wait, const Series& step) {
  double waited = 0, stepped = 0;
  for (size_t i = 0; i < wait.size() && i < step.size(); ++i) {
    if (!wait[i] || !step[i]) continue;
    waited += *wait[i];
    stepped += *step[i];
  }
  return waited + stepped > 0 ? std::optional<double>(waited / (waited + stepped)) : std::nullopt;
}

// Per second over the window, where any interval has a value.
std::optional<double> ratePerSecond(const Series& x, const std::vector<double>& interval_s) {
  double sum = 0, seconds = 0;
  bool any = false;
  for (size_t i = 0; i < x.size() && i < interval_s.size(); ++i) {
    seconds += interval_s[i];
    if (x[i]) {
      sum += *x[i];
      any = true;
    }
  }
  return any && seconds > 0 ? std::optional<double>(sum / seconds) : std::nullopt;
}

std::string num(const std::optional<double>& v, const char* format, double scale = 1.0) {
  return v ? fmt::format(fmt::runtime(format), *v * scale) : std::string("-");
}

std::string clock(int64_t ms) { return timeText(ms).substr(11); }

std::string duration(int64_t ms) {
  const int64_t s = std::max<int64_t>(0, ms / 1000);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
}

// One job's figures over the window, as the list and the detail show them.
struct Figures {
  std::optional<double> steps, wait, gpu, work, read, workers, d_state;
};

// The last kFigureIntervals of a series.
Series tail(const Series& x) {
  return Series(x.end() - static_cast<long>(std::min(x.size(), kFigureIntervals)), x.end());
}
std::vector<double> tail(const std::vector<double>& x) {
  return {x.end() - static_cast<long>(std::min(x.size(), kFigureIntervals)), x.end()};
}
bool reports(const Series& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const auto& v) { return v.has_value(); });
}

Figures figuresOf(const JobSeries& s) {
  Figures f;
  const auto interval = tail(s.interval_s);
  f.steps = ratePerSecond(tail(s.steps), interval);
  f.wait = waitShare(tail(s.data_wait_s), tail(s.step_s));
  // A job that reported within the minute and sends nothing now: its loop is not stepping.
  if (!f.steps && reports(s.steps) && !interval.empty()) f.steps = 0.0;
  f.gpu = meanOf(tail(s.gpu_util_percent));
  f.work = meanOf(tail(s.gpu_work_percent));
  f.read = meanOf(tail(s.read_bytes_per_s));
  f.workers = meanOf(tail(s.workers_cpu));
  f.d_state = meanOf(tail(s.d_state_threads));
  return f;
}

// The host's devices (busiest first) and pressure over the last seconds, in iostat's terms,
// for a screen with no job to show.
template <typename Add>
void renderHost(const JobSeries& host, const Add& add) {
  add("");
  const auto pressure = [](const Series& x) { return num(meanOf(tail(x)), "{:.0f} %", 100); };
  add(fmt::format("  pressure (some)   io {}   cpu {}   memory {}", pressure(host.io_some),
                  pressure(host.cpu_some), pressure(host.memory_some)));
  add("");
  add(fmt::format("  {:<18} {:>9} {:>10} {:>9} {:>9} {:>7} {:>6}", "DEVICE", "READ MB/s",
                  "WRITE MB/s", "r_await", "w_await", "aqu-sz", "%util"));
  struct Row {
    const DeviceSeries* d;
    std::optional<double> util;
  };
  std::vector<Row> rows;
  for (const auto& d : host.devices) rows.push_back({&d, meanOf(tail(d.util_percent))});
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.util.value_or(-1) > b.util.value_or(-1);
  });
  for (const auto& r : rows) {
    const DeviceSeries& d = *r.d;
    add(fmt::format(
        "  {:<20} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}", common::printable(d.name).substr(0, 20),
        num(meanOf(tail(d.read_bytes_per_s)), "{:.1f}", 1e-6),
        num(meanOf(tail(d.write_bytes_per_s)), "{:.1f}", 1e-6),
        num(meanOf(tail(d.r_await_ms)), "{:.2f}ms"), num(meanOf(tail(d.w_await_ms)), "{:.2f}ms"),
        num(meanOf(tail(d.aqu_sz)), "{:.2f}"), num(r.util, "{:.0f} %")));
  }
  if (rows.empty()) add("  no device samples in the last minute");
}

std::string incidentLine(const model::StoredIncident& s, int64_t now_ms) {
  const model::Incident& inc = s.incident;
  std::string where = inc.device;
  if (!inc.physical_device.empty()) where += " (on " + inc.physical_device + ")";
  if (inc.straggler) where += fmt::format(" rank {}", inc.straggler->rank);
  return fmt::format("{} {} since {} ({}), idle {:.0f} %, confidence {:.2f}",
                     model::toString(inc.cls), where.empty() ? "-" : where, clock(inc.start_ms),
                     duration(now_ms - inc.start_ms), inc.idle_share * 100, inc.confidence);
}

}  // namespace

std::vector<std::string> renderTop(const TopData& data, const TopState& state, int width,
                                   int height) {
  std::vector<std::string> lines;
  auto add = [&](std::string line) {
    if (static_cast<int>(lines.size()) >= height) return;
    if (static_cast<int>(line.size()) > width) line.resize(static_cast<size_t>(std::max(width, 0)));
    lines.push_back(std::move(line));
  };
  add(fmt::format("stallwatch top - {} - {} - {}", data.host, clock(data.now_ms), data.db_path));
  add(fmt::format("{} job(s), {} open incident(s)   j/k: job  v: {}  q: quit", data.jobs.size(),
                  data.open.size(), state.evidence ? "figures" : "evidence"));
  add("");
  if (data.jobs.empty()) {
    add("No job in the last minute (found by their GPU processes, dataloader reports,");
    add("or record's --pid/--cgroup). The host meanwhile:");
    if (data.host_series) renderHost(*data.host_series, add);
    return lines;
  }
  const size_t selected = std::min(state.selected, data.jobs.size() - 1);
  add(fmt::format("   {:<4} {:<36} {:>8} {:>6} {:>6} {:>9}", "JOB", "COMMAND", "STEPS/S", "WAIT",
                  "GPU", "READ MB/s"));
  const size_t shown = std::min<size_t>(data.jobs.size(), 5);
  const size_t first = selected < shown ? 0 : selected - shown + 1;
  for (size_t i = first; i < first + shown && i < data.jobs.size(); ++i) {
    const Figures f = figuresOf(data.series[i]);
    std::string label = common::printable(data.jobs[i].label).substr(0, 36);
    add(fmt::format("{}{} {:<4} {:<36} {:>8} {:>6} {:>6} {:>9}", i == selected ? ">" : " ",
                    data.jobs[i].ended_ms ? "x" : " ", data.jobs[i].job_id, label,
                    num(f.steps, "{:.1f}"), num(f.wait, "{:.0f} %", 100), num(f.gpu, "{:.0f} %"),
                    num(f.read, "{:.1f}", 1e-6)));
  }
  add("");
  const model::JobRecord& job = data.jobs[selected];
  const JobSeries& s = data.series[selected];
  const Figures f = figuresOf(s);
  add(fmt::format("JOB {} {}  ({})", job.job_id, common::printable(job.label),
                  common::printable(job.key)));
  add(fmt::format("  {} {}   steps/s {}   data wait {}   GPU {} (work {})",
                  job.ended_ms ? "ended" : "since", clock(job.ended_ms.value_or(job.started_ms)),
                  num(f.steps, "{:.1f}"), num(f.wait, "{:.0f} %", 100), num(f.gpu, "{:.0f} %"),
                  num(f.work, "{:.1f} %")));
  add(fmt::format("  read {} MB/s   workers {} cores   threads in D state {}",
                  num(f.read, "{:.1f}", 1e-6), num(f.workers, "{:.2f}"), num(f.d_state, "{:.0f}")));
  // What limits it over the last minute (a standing condition: not paged).
  if (selected < data.limiters.size() && data.limiters[selected]) {
    const model::LimiterVerdict& v = *data.limiters[selected];
    if (v.limiter != model::Limiter::kUnknown) {
      add(fmt::format("  limiter {} (last minute): input wait {:.0f} %{}",
                      model::toString(v.limiter), v.input_wait_share * 100,
                      v.limiter == model::Limiter::kGpu || v.limiter == model::Limiter::kHost ||
                              v.speedup < 1.05
                          ? std::string()
                          : fmt::format(", ~{:.2g}x on offer", v.speedup)));
    }
  }
  const model::StoredIncident* open = nullptr;
  for (const auto& inc : data.open) {
    if (inc.job_id == job.job_id) open = &inc;
  }
  if (state.evidence) {
    add("");
    if (!open) {
      add("No open incident for this job.");
      return lines;
    }
    add("OPEN " + incidentLine(*open, data.now_ms));
    add(fmt::format("  {:<52} {:>11} {:>11}", "EVIDENCE (* supports)", "BEFORE", "DURING"));
    for (const auto& e : open->incident.evidence) {
      if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
      add(fmt::format("  {} {:<50} {:>11.4g} {:>11.4g}", e.supports ? "*" : " ",
                      e.signal.substr(0, 50), e.baseline, e.during));
    }
    return lines;
  }
  if (s.ranks.size() >= 2) {
    add(fmt::format("  {:<5} {:>8} {:>6} {:>6} {:>8} {:>6} {:>9}", "RANK", "PID", "GPU", "WORK",
                    "STEPS/S", "WAIT", "READ MB/s"));
    for (const auto& r : s.ranks) {
      add(fmt::format("  {:<5} {:>8} {:>6} {:>6} {:>8} {:>6} {:>9}", r.rank, r.pid,
                      num(meanOf(tail(r.gpu_util_percent)), "{:.0f} %"),
                      num(meanOf(tail(r.gpu_work_percent)), "{:.1f} %"),
                      num(ratePerSecond(tail(r.steps), tail(s.interval_s)), "{:.1f}"),
                      num(waitShare(tail(r.data_wait_s), tail(r.step_s)), "{:.0f} %", 100),
                      num(meanOf(tail(r.read_bytes_per_s)), "{:.1f}", 1e-6)));
    }
  }
  add(fmt::format("  {:<40} {:>9} {:>9} {:>7}", "DEVICE / MOUNT", "R_AWAIT", "W_AWAIT", "AQU-SZ"));
  for (const auto& d : s.devices) {
    if (!d.job_reads) continue;
    std::string name = d.name + (d.via.empty() ? "" : " (under " + d.via + ")");
    if (auto it = data.served_by.find(d.name); it != data.served_by.end())
      name += ": " + it->second;
    add(fmt::format("  {:<40} {:>9} {:>9} {:>7}", name.substr(0, 40),
                    num(meanOf(tail(d.r_await_ms)), "{:.2f}ms"),
                    num(meanOf(tail(d.w_await_ms)), "{:.2f}ms"),
                    num(meanOf(tail(d.aqu_sz)), "{:.2f}")));
  }
  add(open ? "OPEN " + incidentLine(*open, data.now_ms) : "No open incident.");
  return lines;
}

}  // namespace stallwatch::render
