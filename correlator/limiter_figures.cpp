// The limiter's figures of a span (correlator/limiter.h): each interval of a job or a rank
// added as seconds-weighted sums, so that spans add up and a live window slides.
#include <algorithm>
#include <cmath>
#include <string>

#include "correlator/attribution.h"
#include "correlator/evidence.h"
#include "correlator/limiter.h"
#include "correlator/limiter_wait.h"

namespace stallwatch::correlator {
namespace {

using evidence::at;

// Reads past this share of the limit are the limit changing under them, not held by it.
constexpr double kOverLimitShare = 1.25;

template <typename Map>
void addText(Map& m, const std::string& text, double dt) {
  if (text.empty()) return;
  double& v = m[text];
  v += dt;
  if (std::abs(v) < 1e-9) m.erase(text);
}

}  // namespace

WaitBounds pinnedWait(double loader, double futex, std::optional<double> gpu_idle,
                      std::optional<double> thread_cpu) {
  if (!gpu_idle) return {loader, loader + futex};
  const double running = thread_cpu.value_or(0.0);
  const double other = std::max(0.0, 1.0 - loader - futex - running);
  const double high = std::max(loader, std::min(loader + futex, *gpu_idle));
  const double low =
      std::max({loader, loader + futex - (1.0 - *gpu_idle), *gpu_idle - running - other});
  return {std::min(low, high), high};
}

void InputFigures::add(const model::JobSeries& s, size_t i, const model::RankSeries* r, int sign) {
  if (i >= s.interval_s.size()) return;
  const double dt = s.interval_s[i] * sign;
  if (dt == 0) return;
  seconds_ += dt;
  gpus_ = std::max(gpus_, r ? 1.0 : static_cast<double>(s.gpu_count));
  // The rank's own pace where one is judged, else the job's: one shape, read alike.
  const model::PaceSeries& p = r ? static_cast<const model::PaceSeries&>(*r) : s;
  // The hook's figures, the job's (summed over its ranks) or the rank's own.
  const auto wait = at(p.data_wait_s, i);
  const auto step = at(p.step_s, i);
  const auto steps = at(p.steps, i);
  double interval_wait = -1;  // this interval's share waiting for input, where known
  if (wait || steps) {
    hook_seconds_ += dt;
    wait_s_ += wait.value_or(0) * sign;
    step_s_ += step.value_or(0) * sign;
    steps_ += steps.value_or(0) * sign;
    if (wait && step && *wait + *step > 0) interval_wait = *wait / (*wait + *step);
  }
  const auto thread = at(p.main_thread_cpu, i);
  const auto runqueue = at(p.main_thread_runqueue, i);
  if (s.ranks.size() >= 2) collective_seconds_ += dt;
  if (thread) {
    thread_seconds_ += dt;
    thread_busy_ += *thread * dt;
    thread_runqueue_ += runqueue.value_or(0) * dt;
  }
  // Utilisation read 0 while GPM saw the GPU work: the driver's rate that interval is no reading
  // (seen on an H100: 0 for a whole run while GPM work read 10-20 %), not an idle GPU.
  auto util = at(p.gpu_util_percent, i);
  if (const auto work = at(p.gpu_work_percent, i); util && *util <= 0 && work && *work >= 1.0)
    util.reset();
  if (util) {
    gpu_seconds_ += dt;
    gpu_idle_ += (1.0 - std::clamp(*util / 100.0, 0.0, 1.0)) * dt;
  }
  const auto loader = at(p.main_thread_loader_wait, i);
  if (loader) {
    const double futex = at(p.main_thread_futex_wait, i).value_or(0);
    const double pin = at(p.pin_memory, i).value_or(0);
    sampled_seconds_ += dt;
    loader_wait_ += *loader * dt;
    futex_wait_ += futex * dt;
    pin_memory_ += pin * dt;
    if (interval_wait < 0)
      interval_wait =
          pin > 0.5 ? pinnedWait(*loader, futex,
                                 util ? std::optional(1.0 - std::clamp(*util / 100.0, 0.0, 1.0))
                                      : std::nullopt,
                                 thread)
                          .middle()
                    : *loader;
  }
  if (interval_wait < 0 && thread && util) {
    interval_wait = std::min(std::max(0.0, 1.0 - *thread - runqueue.value_or(0)),
                             1.0 - std::clamp(*util / 100.0, 0.0, 1.0));
  }
  if (interval_wait >= 0) {
    wait_bins_[std::min(kWaitBins - 1, static_cast<int>(interval_wait * kWaitBins))] += dt;
  }
  if (const auto workers = at(p.workers, i)) {
    process_seconds_ += dt;
    workers_ += *workers * dt;
    workers_cpu_ += at(p.workers_cpu, i).value_or(0) * dt;
    d_state_ += at(p.d_state_threads, i).value_or(0) * dt;
    main_cpu_ += at(p.main_cpu, i).value_or(0) * dt;
  }
  read_bytes_ += at(p.read_bytes_per_s, i).value_or(0) * dt;
  if (!r) rchar_ += at(s.rchar_per_s, i).value_or(0) * dt;
  const auto busy = at(s.host_busy_cores, i), online = at(s.host_online_cpus, i);
  if (busy && online) {
    host_seconds_ += dt;
    host_busy_ += *busy * dt;
    host_online_ += *online * dt;
  }
  if (const auto allowed = at(s.cpus_allowed, i)) {
    cpus_allowed_seconds_ += dt;
    cpus_allowed_ += *allowed * dt;
  }
  const auto limit = at(s.cgroup_read_limit_bytes_per_s, i);
  const auto limited = at(s.cgroup_limited_read_bytes_per_s, i);
  if (limit && *limit > 0 && limited) {
    limit_seconds_ += dt;
    limited_read_ += *limited * dt;
    read_limit_ += *limit * dt;
    // At the limit: reads held near it. Far over it, the limit was set within the interval.
    if (*limited >= kAtLimitShare * *limit && *limited <= kOverLimitShare * *limit)
      at_limit_seconds_ += dt;
    if (i < s.cgroup_read_limit.size()) addText(read_limits_, s.cgroup_read_limit[i], dt);
  }
  const auto memory = std::max(at(s.cgroup_memory_some, i), at(s.memory_some, i));
  if (memory) {
    memory_seconds_ += dt;
    memory_some_ += *memory * dt;
  }
  if (const auto throttled = at(s.cgroup_cpu_throttled, i)) {
    throttle_seconds_ += dt;
    cpu_throttled_ += *throttled * dt;
  }
  if (i < s.workers_sleep_wchan.size()) addText(workers_sleep_, s.workers_sleep_wchan[i], dt);
  if (i < s.d_state_wchan.size()) addText(d_state_wchans_, s.d_state_wchan[i], dt);
  for (const model::DeviceSeries& d : s.devices) {
    if (!d.job_reads) continue;
    Device& e = devices_[d.name];
    e.mount = !d.name.empty() && d.name.front() == '/';  // a mount target: no %util of its own
    e.via = d.via;
    e.direct = d.direct();
    e.seconds_ += dt;
    if (const auto u = at(d.util_percent, i)) {
      e.util_ += *u * dt;
      e.util_seconds_ += dt;
    }
    if (const auto a = at(d.r_await_ms, i)) {
      e.await_ += *a * dt;
      e.await_seconds_ += dt;
    }
    e.aqu_ += at(d.aqu_sz, i).value_or(0) * dt;
    e.read_ += at(d.read_bytes_per_s, i).value_or(0) * dt;
  }
}

void InputFigures::merge(const InputFigures& o) {
  seconds_ += o.seconds_;
  gpus_ = std::max(gpus_, o.gpus_);
  for (auto [mine, theirs] : {std::pair{&wait_s_, o.wait_s_},
                              {&step_s_, o.step_s_},
                              {&steps_, o.steps_},
                              {&hook_seconds_, o.hook_seconds_},
                              {&thread_busy_, o.thread_busy_},
                              {&thread_runqueue_, o.thread_runqueue_},
                              {&thread_seconds_, o.thread_seconds_},
                              {&main_cpu_, o.main_cpu_},
                              {&gpu_idle_, o.gpu_idle_},
                              {&gpu_seconds_, o.gpu_seconds_},
                              {&workers_, o.workers_},
                              {&workers_cpu_, o.workers_cpu_},
                              {&d_state_, o.d_state_},
                              {&process_seconds_, o.process_seconds_},
                              {&read_bytes_, o.read_bytes_},
                              {&rchar_, o.rchar_},
                              {&host_busy_, o.host_busy_},
                              {&host_online_, o.host_online_},
                              {&host_seconds_, o.host_seconds_},
                              {&cpus_allowed_, o.cpus_allowed_},
                              {&cpus_allowed_seconds_, o.cpus_allowed_seconds_},
                              {&at_limit_seconds_, o.at_limit_seconds_},
                              {&limit_seconds_, o.limit_seconds_},
                              {&limited_read_, o.limited_read_},
                              {&read_limit_, o.read_limit_},
                              {&memory_some_, o.memory_some_},
                              {&memory_seconds_, o.memory_seconds_},
                              {&cpu_throttled_, o.cpu_throttled_},
                              {&throttle_seconds_, o.throttle_seconds_},
                              {&loader_wait_, o.loader_wait_},
                              {&collective_seconds_, o.collective_seconds_},
                              {&futex_wait_, o.futex_wait_},
                              {&pin_memory_, o.pin_memory_},
                              {&sampled_seconds_, o.sampled_seconds_}}) {
    *mine += theirs;
  }
  for (int b = 0; b < kWaitBins; ++b) wait_bins_[b] += o.wait_bins_[b];
  for (const auto& [name, d] : o.devices_) {
    Device& e = devices_[name];
    e.via = d.via;
    e.direct = d.direct;
    for (auto [mine, theirs] : {std::pair{&e.util_, d.util_},
                                {&e.util_seconds_, d.util_seconds_},
                                {&e.await_, d.await_},
                                {&e.await_seconds_, d.await_seconds_},
                                {&e.aqu_, d.aqu_},
                                {&e.read_, d.read_},
                                {&e.seconds_, d.seconds_}})
      *mine += theirs;
  }
  for (const auto& [t, v] : o.read_limits_) addText(read_limits_, t, v);
  for (const auto& [t, v] : o.workers_sleep_) addText(workers_sleep_, t, v);
  for (const auto& [t, v] : o.d_state_wchans_) addText(d_state_wchans_, t, v);
}

}  // namespace stallwatch::correlator
