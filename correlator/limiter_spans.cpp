// The limiter over a job's run, its windows and phases, and each rank (correlator/limiter.h):
// which intervals are judged, the spans judged, and the verdict said in a line.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "correlator/evidence.h"
#include "correlator/limiter.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;
using model::Limiter;
using model::LimiterVerdict;
using model::WaitSource;

// Windows with less judged time than this share of a window are too thin to judge alone.
constexpr double kMinWindowShare = 0.2;

}  // namespace

std::vector<bool> limiterIntervals(const model::JobSeries& s, const Analysis& a,
                                   std::optional<double>* incidents_share) {
  const size_t n = s.size();
  std::vector<bool> in(n, false);
  std::optional<size_t> first, last;
  for (size_t i = 0; i < n; ++i) {
    std::optional<double> progress;
    if (a.progress_signal != model::ProgressSignal::kNone) {
      progress = progressAt(s, i, a.progress_signal, true);
    } else {
      progress = at(s.main_thread_cpu, i);  // no GPU, no hook: the job ran at all
    }
    if (progress && *progress > 0) {
      if (!first) first = i;
      last = i;
    }
  }
  if (!first) return in;
  for (size_t i = *first; i <= *last; ++i) in[i] = true;
  auto cut = [&](int64_t from_ms, int64_t to_ms) {
    for (size_t i = 0; i < n; ++i) {
      if (s.ts_ms[i] > from_ms && s.ts_ms[i] <= to_ms) in[i] = false;
    }
  };
  if (a.idle_at_exit) cut(a.idle_at_exit->start_ms, a.idle_at_exit->end_ms);
  for (const auto& w : a.outside_loop) cut(w.start_ms, w.end_ms);
  const auto span = static_cast<size_t>(std::count(in.begin(), in.end(), true));
  std::vector<bool> outside = in;
  for (const auto& inc : a.incidents) {
    for (size_t i = inc.first; i <= inc.last && i < n; ++i) outside[i] = false;
  }
  const auto left = static_cast<size_t>(std::count(outside.begin(), outside.end(), true));
  if (span == 0 || 2 * left >= span) return outside;
  if (incidents_share)
    *incidents_share = static_cast<double>(span - left) / static_cast<double>(span);
  return in;
}

namespace {

LimiterVerdict judgeSpan(const InputFigures& f, const model::JobSeries& s, size_t first,
                         size_t last, const LimiterConfig& cfg) {
  LimiterVerdict v = judgeLimiter(f, cfg);
  v.start_ms = s.ts_ms[first] - static_cast<int64_t>(std::llround(s.interval_s[first] * 1000));
  v.end_ms = s.ts_ms[last];
  return v;
}

}  // namespace

model::LimiterVerdict judgeSpan(const model::JobSeries& s, size_t first, size_t last,
                                const std::vector<bool>* in, const LimiterConfig& cfg) {
  if (s.size() == 0 || first > last || last >= s.size()) return {};
  auto figuresOf = [&](const model::RankSeries* rank) {
    InputFigures f;
    for (size_t i = first; i <= last; ++i)
      if (!in || (*in)[i]) f.add(s, i, rank);
    return f;
  };
  LimiterVerdict v;
  if (s.ranks.size() >= 2) {
    double most = -1;
    for (const auto& r : s.ranks) {
      LimiterVerdict rank = judgeLimiter(figuresOf(&r), cfg);
      if (rank.wait_source != WaitSource::kNone && rank.input_wait_share > most) {
        most = rank.input_wait_share;
        v = std::move(rank);
      }
    }
    if (most < 0) v = judgeLimiter(figuresOf(nullptr), cfg);
    v.gpus = s.gpu_count;
    v.input_wait_gpu_seconds = v.input_wait_share * v.seconds * v.gpus;
  } else {
    v = judgeLimiter(figuresOf(nullptr), cfg);
  }
  v.start_ms = s.ts_ms[first] - static_cast<int64_t>(std::llround(s.interval_s[first] * 1000));
  v.end_ms = s.ts_ms[last];
  return v;
}

model::JobLimits analyzeLimits(const model::JobSeries& s, const Analysis& a,
                               const LimiterConfig& cfg) {
  model::JobLimits out;
  out.window_seconds = cfg.window_s;
  std::optional<double> incidents_share;
  const std::vector<bool> in = limiterIntervals(s, a, &incidents_share);
  std::optional<size_t> first, last;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]) continue;
    if (!first) first = i;
    last = i;
  }
  if (!first) {
    out.run.limiter = Limiter::kUnknown;
    out.run.figures.push_back({model::FigureKind::kNoProgress, 0, true, "",
                               "(the job never made progress in the range)"});
    return out;
  }
  // Several ranks: each judged on its own figures; the job is held by the rank that waited
  // most for input (the others wait for it inside their collectives).
  const model::RankSeries* view = nullptr;
  if (s.ranks.size() >= 2) {
    double most = -1;
    for (const auto& r : s.ranks) {
      InputFigures f;
      for (size_t i = *first; i <= *last; ++i)
        if (in[i]) f.add(s, i, &r);
      model::RankLimiter rl{r.rank, judgeSpan(f, s, *first, *last, cfg)};
      if (rl.verdict.wait_source != WaitSource::kNone && rl.verdict.input_wait_share > most) {
        most = rl.verdict.input_wait_share;
        out.slowest_rank = r.rank;
        view = &r;
      }
      out.ranks.push_back(std::move(rl));
    }
  }
  auto figuresOver = [&](size_t from, size_t to) {
    InputFigures f;
    for (size_t i = from; i <= to; ++i)
      if (in[i]) f.add(s, i, view);
    return f;
  };
  auto asJob = [&](LimiterVerdict v) {  // a rank's wait holds every GPU of the job
    v.gpus = s.gpu_count;
    v.input_wait_gpu_seconds = v.input_wait_share * v.seconds * v.gpus;
    return v;
  };
  out.run = asJob(judgeSpan(figuresOver(*first, *last), s, *first, *last, cfg));
  out.run.incidents_included_share = incidents_share;
  // Windows of window_s on the job's clock, each judged where it holds enough judged time.
  const int64_t window_ms = static_cast<int64_t>(cfg.window_s * 1000);
  if (window_ms <= 0) return out;
  struct Window {
    size_t first, last;
    InputFigures figures;
  };
  std::vector<Window> windows;
  const int64_t origin = s.ts_ms[*first] - static_cast<int64_t>(s.interval_s[*first] * 1000);
  for (size_t i = *first; i <= *last;) {
    const int64_t k = (s.ts_ms[i] - origin - 1) / window_ms;
    size_t j = i;
    while (j + 1 <= *last && (s.ts_ms[j + 1] - origin - 1) / window_ms == k) ++j;
    Window w{i, j, figuresOver(i, j)};
    if (w.figures.seconds() >= kMinWindowShare * cfg.window_s) windows.push_back(std::move(w));
    i = j + 1;
  }
  if (windows.size() < 2) return out;
  for (const Window& w : windows)
    out.windows.push_back(asJob(judgeSpan(w.figures, s, w.first, w.last, cfg)));
  // Phases: windows in a row with the same limiter, judged again as one span.
  for (size_t k = 0; k < windows.size();) {
    size_t end = k;
    InputFigures merged = windows[k].figures;
    while (end + 1 < windows.size() && out.windows[end + 1].limiter == out.windows[k].limiter) {
      ++end;
      merged.merge(windows[end].figures);
    }
    out.phases.push_back(asJob(judgeSpan(merged, s, windows[k].first, windows[end].last, cfg)));
    k = end + 1;
  }
  return out;
}

std::string describeLimiter(const LimiterVerdict& v, const std::string& span) {
  const std::string name = model::toString(v.limiter);
  if (v.limiter == Limiter::kUnknown) {
    return name + ": the evidence does not decide" +
           (v.figures.empty() ? std::string() : " (" + v.figures.front().name() + ")");
  }
  const double gpu_hours = v.input_wait_gpu_seconds / 3600.0;
  const std::string cost = gpu_hours >= 0.1 ? fmt::format("{:.2f} GPU-h", gpu_hours)
                                            : fmt::format("{:.0f} GPU-s", v.input_wait_gpu_seconds);
  // The window named (issue 42: `jobs` said 23.9 % over the whole run beside 14 % "of the run"
  // that was the time outside its incidents).
  const double spanned = static_cast<double>(v.end_ms - v.start_ms) / 1000.0;
  const std::string window = !span.empty() ? span
                             : v.incidents_included_share || v.seconds >= 0.95 * spanned
                                 ? "the run"
                                 : "the run outside incidents";
  std::string out = fmt::format("{}: the loop waited for input {:.0f} % of {} ({})", name,
                                v.input_wait_share * 100, window, cost);
  if (v.limiter == Limiter::kGpu) return out + "; nothing to gain from the input side";
  auto figure = [&](model::FigureKind kind) -> std::optional<double> {
    for (const auto& f : v.figures)
      if (f.kind == kind) return f.value;
    return std::nullopt;
  };
  if (v.limiter == Limiter::kInputCpu || v.limiter == Limiter::kInputWorkers) {
    const auto workers = figure(model::FigureKind::kWorkers),
               cores = figure(model::FigureKind::kWorkersCpuCores);
    const auto allowed = figure(model::FigureKind::kJobCpusAllowed);
    const auto online = allowed ? allowed : figure(model::FigureKind::kHostCpusOnline);
    if (workers && cores) {
      out += fmt::format("; the {:.0f} workers used {:.1f} cores{}", *workers, *cores,
                         online ? fmt::format(" of {:.0f}", *online) : "");
    }
  }
  if (!v.device.empty()) {
    out += fmt::format(" on {}{}{}", v.device,
                       v.physical_device.empty() ? "" : " (on " + v.physical_device + ")",
                       v.device_at_limit ? ", at its limit" : "");
  }
  if (v.limiter == Limiter::kIoThrottled && !v.limit.empty()) out += " under " + v.limit;
  std::string pace;
  if (v.steps_per_second && v.speedup > 1.0) {
    pace = fmt::format(" ({:.0f} steps/s)", *v.steps_per_second * v.speedup);
  }
  if (v.speedup > 1.05 && v.limiter != Limiter::kHost) {
    out += v.speedup_high - v.speedup_low > 0.1
               ? fmt::format(" - if input kept up: ~{:.2g}x, {:.2g}-{:.2g}x{}", v.speedup,
                             v.speedup_low, v.speedup_high, pace)
               : fmt::format(" - if input kept up: up to ~{:.2g}x{}", v.speedup, pace);
  }
  return out;
}

}  // namespace stallwatch::correlator
