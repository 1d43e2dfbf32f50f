// The post-mortem report as JSON: one object per job, every figure the text gives and the
// evidence behind each claim.
#include <algorithm>

#include "model/incident_json.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

template <typename T>
nlohmann::json orNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json rankJson(const model::RankFigures& f) {
  return {{"rank", f.rank},
          {"pid", f.pid},
          {"gpu", f.gpu},
          {"gpu_util_p50_percent", orNull(f.gpu_util_p50_percent)},
          {"gpu_work_p50_percent", orNull(f.gpu_work_p50_percent)},
          {"steps_per_second_p50", orNull(f.steps_per_second_p50)},
          {"data_wait_share_p50", orNull(f.data_wait_share_p50)},
          {"read_bytes_per_second_p50", orNull(f.read_bytes_per_second_p50)}};
}

nlohmann::json outsideLoopJson(const std::vector<model::WorkSpan>& spans) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : spans) {
    out.push_back({{"start_ms", w.start_ms},
                   {"end_ms", w.end_ms},
                   {"workers_cpu", w.workers_cpu},
                   {"workers_cpu_before", w.workers_cpu_before},
                   {"read_bytes_per_second", w.read_bytes_per_s},
                   {"read_bytes_per_second_before", w.read_bytes_per_s_before},
                   {"gpu_share", w.gpu_share ? nlohmann::json(*w.gpu_share) : nlohmann::json()}});
  }
  return out;
}

nlohmann::json standingJson(const std::vector<model::StandingSpan>& spans) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : spans) {
    out.push_back({{"start_ms", w.start_ms},
                   {"end_ms", w.end_ms},
                   {"class", model::toString(w.cls)},
                   {"reason", w.no_baseline ? "no_baseline" : "limit_held_before"}});
  }
  return out;
}

nlohmann::json idleJson(const std::optional<model::IdleSpan>& idle) {
  if (!idle) return nullptr;
  return {{"start_ms", idle->start_ms},
          {"end_ms", idle->end_ms},
          {"seconds", static_cast<double>(idle->end_ms - idle->start_ms) / 1000.0},
          {"workers_cpu_p50", idle->workers_cpu},
          {"main_cpu_p50", idle->main_cpu},
          {"read_bytes_per_second_p50", idle->read_bytes_per_s},
          {"write_bytes_per_second_p50", idle->write_bytes_per_s},
          {"processes_idle", idle->processes_idle}};
}

}  // namespace

nlohmann::json incidentJson(const model::Incident& inc) {
  nlohmann::json straggler = nullptr;
  if (inc.straggler) {
    straggler = {
        {"rank", inc.straggler->rank}, {"pid", inc.straggler->pid}, {"gpu", inc.straggler->gpu}};
  }
  nlohmann::json evidence = nlohmann::json::array();
  for (const auto& e : inc.evidence) evidence.push_back(model::evidenceItemJson(e));
  return {{"start_ms", inc.start_ms},
          {"end_ms", inc.end_ms},
          {"class", model::toString(inc.cls)},
          {"device", inc.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(inc.device)},
          {"physical_device", inc.physical_device.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(inc.physical_device)},
          {"idle_share", inc.idle_share},
          {"gpu_seconds_lost", inc.gpu_seconds_lost},
          {"confidence", inc.confidence},
          {"straggler", straggler},
          {"waiting_ranks", inc.waiting_ranks},
          {"ranks_starved", inc.ranks_starved},
          {"evidence", evidence}};
}

// Each piece of advice: its kind for a program, its sentence for people.
nlohmann::json adviceJson(const std::vector<model::Advice>& advice) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : advice) out.push_back({{"kind", model::toString(a.kind)}, {"text", a.text}});
  return out;
}

nlohmann::json hostDevicesJson(const HostReport& host) {
  nlohmann::json out = nlohmann::json::array();
  for (const model::DeviceLatency& d : host.devices) {
    out.push_back({{"device", d.name},
                   {"r_await_p50_ms", orNull(d.r_await_p50)},
                   {"r_await_p99_ms", orNull(d.r_await_p99)},
                   {"w_await_p50_ms", orNull(d.w_await_p50)},
                   {"w_await_p99_ms", orNull(d.w_await_p99)}});
  }
  return out;
}

nlohmann::json goodputJson(const model::Goodput& g) {
  if (!g.share) return nullptr;
  return {
      {"stalls_gpu_seconds", g.stall_gpu_seconds},
      {"input_wait_gpu_seconds", g.input_wait_gpu_seconds},
      {"input_wait_not_counted",
       *g.input_wait_not_counted ? nlohmann::json(g.input_wait_not_counted) : nlohmann::json()}};
}

nlohmann::json limiterJson(const model::LimiterVerdict& v) {
  nlohmann::json figures = nlohmann::json::array();
  for (const auto& f : v.figures)
    figures.push_back({{"name", f.name()}, {"value", f.value}, {"decides", f.decides}});
  return {{"start_ms", v.start_ms},
          {"end_ms", v.end_ms},
          {"seconds", v.seconds},
          {"incidents_included_share", orNull(v.incidents_included_share)},
          {"limiter", model::toString(v.limiter)},
          {"confidence", v.confidence},
          {"wait_source", v.wait_source == model::WaitSource::kNone
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(model::toString(v.wait_source))},
          {"input_wait_share", v.input_wait_share},
          {"gpus", v.gpus},
          {"input_wait_gpu_seconds", v.input_wait_gpu_seconds},
          {"input_wait_gpu_hours", v.input_wait_gpu_seconds / 3600.0},
          {"steps_per_second", orNull(v.steps_per_second)},
          {"speedup", v.speedup},
          {"speedup_low", v.speedup_low},
          {"speedup_high", v.speedup_high},
          {"steps_per_second_if_input_kept_up",
           v.steps_per_second ? nlohmann::json(*v.steps_per_second * v.speedup)
                              : nlohmann::json(nullptr)},
          {"device", v.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.device)},
          {"physical_device",
           v.physical_device.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.physical_device)},
          {"device_at_limit", v.device_at_limit},
          {"limit", v.limit.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.limit)},
          {"figures", figures},
          {"advice", adviceJson(v.advice)}};
}

nlohmann::json limitsJson(const model::JobLimits& l) {
  nlohmann::json out = limiterJson(l.run);
  nlohmann::json windows = nlohmann::json::array(), phases = nlohmann::json::array(),
                 ranks = nlohmann::json::array();
  for (const auto& w : l.windows) windows.push_back(limiterJson(w));
  for (const auto& p : l.phases) phases.push_back(limiterJson(p));
  for (const auto& r : l.ranks) {
    nlohmann::json j = limiterJson(r.verdict);
    j["rank"] = r.rank;
    ranks.push_back(std::move(j));
  }
  out["window_seconds"] = l.window_seconds;
  out["windows"] = std::move(windows);
  out["phases"] = std::move(phases);
  out["ranks"] = std::move(ranks);
  out["slowest_rank"] = orNull(l.slowest_rank);
  return out;
}

nlohmann::json renderJson(const std::vector<JobReport>& reports) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : reports) {
    nlohmann::json incidents = nlohmann::json::array();
    for (const auto& inc : r.analysis.incidents) incidents.push_back(incidentJson(inc));
    nlohmann::json lost = nlohmann::json::object();
    for (int c = 0; c < model::kStallClassCount; ++c) {
      lost[model::toString(static_cast<model::StallClass>(c))] = r.analysis.gpu_seconds_lost[c];
    }
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& f : r.ranks) ranks.push_back(rankJson(f));
    nlohmann::json gaps = nlohmann::json::array();
    for (const auto& g : r.gaps) {
      gaps.push_back({{"start_ms", g.start_ms},
                      {"end_ms", g.end_ms},
                      {"missing_intervals", g.missing_intervals}});
    }
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : r.devices) {
      devices.push_back(
          {{"device", d.name},
           {"via", d.via},
           {"r_await_p50_ms", orNull(d.r_await_p50)},
           {"r_await_p99_ms", orNull(d.r_await_p99)},
           {"w_await_p50_ms", orNull(d.w_await_p50)},
           {"w_await_p99_ms", orNull(d.w_await_p99)},
           {"health", d.health.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.health)},
           {"health_evidence", d.health_evidence},
           {"served_by",
            d.served_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.served_by)}});
    }
    nlohmann::json io_latency = nlohmann::json::array();
    auto quantiles = [](const model::IoLatencySlots& slots, uint64_t count) {
      return nlohmann::json{{"count", count},
                            {"p50_ms", orNull(model::ioLatencyQuantileMs(slots, 0.5))},
                            {"p99_ms", orNull(model::ioLatencyQuantileMs(slots, 0.99))},
                            {"p999_ms", orNull(model::ioLatencyQuantileMs(slots, 0.999))}};
    };
    for (const auto& l : r.io_latency) {
      io_latency.push_back({{"device", l.device},
                            {"op", l.op},
                            {"all", quantiles(l.all, l.all_count)},
                            {"job", quantiles(l.job, l.job_count)},
                            {"others", quantiles(l.others, l.others_count)}});
    }
    out.push_back(
        {{"job_id", r.job.job_id},
         {"key", r.job.key},
         {"label", r.job.label},
         {"start_ms", r.series.ts_ms.front()},
         {"end_ms", r.series.ts_ms.back()},
         {"intervals", r.series.size()},
         {"progress_signal", model::toString(r.analysis.progress_signal)},
         {"cgroup_limits", r.job.cgroup_limits.empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(r.job.cgroup_limits)},
         {"gpus", r.series.gpu_count},
         {"goodput", r.goodput.share ? nlohmann::json(*r.goodput.share) : nlohmann::json()},
         {"goodput_unknown_because",
          r.goodput.share ? nlohmann::json() : nlohmann::json(r.goodput.unknown_because)},
         {"goodput_lost", goodputJson(r.goodput)},
         {"limiter", limitsJson(r.limits)},
         {"gpu_seconds_total", r.analysis.gpu_seconds_total},
         {"gpu_seconds_lost_by_class", lost},
         {"blips", r.analysis.blips},
         {"idle_at_exit", idleJson(r.analysis.idle_at_exit)},
         {"outside_loop", outsideLoopJson(r.analysis.outside_loop)},
         {"standing", standingJson(r.analysis.standing)},
         {"incidents", incidents},
         {"ranks", ranks},
         {"gaps", gaps},
         {"devices", devices}});
    if (!io_latency.empty()) out.back()["io_latency"] = io_latency;
  }
  return out;
}

}  // namespace stallwatch::render
