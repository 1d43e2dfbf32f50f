#include "cli/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace stallwatch::cli {
namespace {

template <typename T>
nlohmann::json orNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string ms(const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : "-"; }

double goodputOf(const correlator::Analysis& a, const model::JobSeries& s) {
  double lost = 0;
  for (double l : a.gpu_seconds_lost) lost += l;
  if (a.gpu_seconds_total > 0) return std::clamp(1.0 - lost / a.gpu_seconds_total, 0.0, 1.0);
  // No GPUs: the share of intervals not spent in incidents, weighted by how idle they were.
  double total = 0, idle = 0;
  for (double i : s.interval_s) total += i;
  for (const auto& inc : a.incidents) {
    for (size_t k = inc.first; k <= inc.last; ++k) idle += s.interval_s[k] * inc.idle_share;
  }
  return total > 0 ? std::clamp(1.0 - idle / total, 0.0, 1.0) : 1.0;
}

// Holes longer than one and a half of the job's typical interval.
std::vector<JobReport::Gap> gapsOf(const model::JobSeries& s) {
  std::vector<JobReport::Gap> gaps;
  if (s.size() < 2) return gaps;
  std::vector<double> intervals(s.interval_s.begin(), s.interval_s.end());
  std::nth_element(intervals.begin(), intervals.begin() + static_cast<long>(intervals.size() / 2), intervals.end());
  const double typical_ms = std::max(1.0, intervals[intervals.size() / 2] * 1000.0);
  for (size_t i = 1; i < s.size(); ++i) {
    const double step_ms = static_cast<double>(s.ts_ms[i] - s.ts_ms[i - 1]);
    if (step_ms > 1.5 * typical_ms) {
      gaps.push_back({s.ts_ms[i - 1], s.ts_ms[i], static_cast<int64_t>(std::llround(step_ms / typical_ms)) - 1});
    }
  }
  return gaps;
}

}  // namespace

std::string timeText(int64_t t_ms) {
  const time_t t = static_cast<time_t>(t_ms / 1000);
  tm utc{};
  gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &utc);
  return buffer;
}

namespace {

// The drive's last health verdict at or before UNTIL_MS (schema 5 recordings).
void attachHealth(SQLite::Database& db, DeviceLatency& d, int64_t until_ms) {
  SQLite::Statement q(db, "SELECT verdict, evidence FROM drive_health WHERE device = ? AND ts_ms <= ? "
                          "ORDER BY ts_ms DESC LIMIT 1");
  q.bind(1, d.name);
  q.bind(2, until_ms);
  if (!q.executeStep()) return;
  d.health = q.getColumn(0).getString();
  const auto evidence = nlohmann::json::parse(q.getColumn(1).getString(), nullptr, false);
  if (evidence.is_array() && !evidence.empty() && evidence[0].is_object()) {
    d.health_evidence = evidence[0].value("counter", "") + " " + evidence[0].value("value", "");
  }
}

}  // namespace

std::vector<JobReport> buildReports(SQLite::Database& db, std::optional<int64_t> job_id,
                                    const storage::TimeRange& range) {
  std::vector<JobReport> reports;
  const bool has_health = db.execAndGet("PRAGMA user_version").getInt() >= 5;
  for (auto& job : storage::listJobs(db, job_id)) {
    JobReport r;
    r.job = std::move(job);
    r.series = storage::loadJobSeries(db, r.job, range);
    if (r.series.size() == 0) continue;
    r.analysis = storage::analyzeStoredJob(db, r.job, r.series);
    r.goodput = goodputOf(r.analysis, r.series);
    r.gaps = gapsOf(r.series);
    for (const auto& d : r.series.devices) {
      if (!d.job_reads) continue;
      r.devices.push_back({d.name, d.via, true, d.also_direct, correlator::percentile(d.r_await_ms, 50),
                           correlator::percentile(d.r_await_ms, 99),
                           correlator::percentile(d.w_await_ms, 50),
                           correlator::percentile(d.w_await_ms, 99), "", ""});
      if (has_health) attachHealth(db, r.devices.back(), r.series.ts_ms.back());
    }
    reports.push_back(std::move(r));
  }
  return reports;
}

std::string describeIncident(const model::Incident& inc) {
  std::string where;
  if (!inc.device.empty()) {
    where = " " + inc.device + (inc.physical_device.empty() ? "" : " (on " + inc.physical_device + ")");
  }
  return fmt::format("{} .. {} ({:.0f} s)  {}{}  idle {:.0f} %  {:.1f} GPU-s lost  confidence {:.2f}",
                     timeText(inc.start_ms), timeText(inc.end_ms).substr(11),
                     static_cast<double>(inc.end_ms - inc.start_ms) / 1000.0,
                     model::toString(inc.cls), where, inc.idle_share * 100, inc.gpu_seconds_lost,
                     inc.confidence);
}

nlohmann::json incidentJson(const model::Incident& inc) {
  nlohmann::json straggler = nullptr;
  if (inc.straggler) {
    straggler = {{"rank", inc.straggler->rank}, {"pid", inc.straggler->pid}, {"gpu", inc.straggler->gpu}};
  }
  nlohmann::json evidence = nlohmann::json::array();
  for (const auto& e : inc.evidence) {
    evidence.push_back({{"signal", e.signal}, {"baseline", e.baseline}, {"during", e.during},
                        {"supports", e.supports}});
  }
  return {{"start_ms", inc.start_ms},
          {"end_ms", inc.end_ms},
          {"class", model::toString(inc.cls)},
          {"device", inc.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(inc.device)},
          {"physical_device",
           inc.physical_device.empty() ? nlohmann::json(nullptr) : nlohmann::json(inc.physical_device)},
          {"idle_share", inc.idle_share},
          {"gpu_seconds_lost", inc.gpu_seconds_lost},
          {"confidence", inc.confidence},
          {"straggler", straggler},
          {"waiting_ranks", inc.waiting_ranks},
          {"ranks_starved", inc.ranks_starved},
          {"evidence", evidence}};
}

namespace {

std::string progressText(const correlator::Analysis& a, const model::JobSeries& s) {
  switch (a.progress_signal) {
    case model::ProgressSignal::kNone: return "nothing (no GPU readings, no dataloader reports)";
    case model::ProgressSignal::kSteps: return "dataloader steps per second";
    case model::ProgressSignal::kGpuWork:
      return fmt::format("GPU work (GPM tensor/DRAM activity) of {} GPU(s)", s.gpu_count);
    case model::ProgressSignal::kSlowestRankGpuUtil:
      return fmt::format("GPU utilisation of the least busy of {} ranks (no GPM on these GPUs)", s.ranks.size());
    case model::ProgressSignal::kGpuUtil: break;
  }
  return fmt::format("GPU utilisation of {} GPU(s)", s.gpu_count);
}

std::string share(const std::optional<double>& v) { return v ? fmt::format("{:.0f} %", *v * 100) : "-"; }
std::string percent(const std::optional<double>& v) { return v ? fmt::format("{:.0f} %", *v) : "-"; }

// Per rank: its GPU's median utilisation and activity, its median data wait share and reads.
nlohmann::json rankFigures(const model::JobSeries& s, const model::RankSeries& r) {
  model::Series wait(s.size());
  for (size_t i = 0; i < s.size() && i < r.data_wait_s.size(); ++i) {
    if (r.data_wait_s[i] && s.interval_s[i] > 0) wait[i] = *r.data_wait_s[i] / s.interval_s[i];
  }
  model::Series steps_per_s(s.size());
  for (size_t i = 0; i < s.size() && i < r.steps.size(); ++i) {
    if (r.steps[i] && s.interval_s[i] > 0) steps_per_s[i] = *r.steps[i] / s.interval_s[i];
  }
  return {{"rank", r.rank},
          {"pid", r.pid},
          {"gpu", r.gpu},
          {"gpu_util_p50_percent", orNull(correlator::percentile(r.gpu_util_percent, 50))},
          {"gpu_work_p50_percent", orNull(correlator::percentile(r.gpu_work_percent, 50))},
          {"steps_per_second_p50", orNull(correlator::percentile(steps_per_s, 50))},
          {"data_wait_share_p50", orNull(correlator::percentile(wait, 50))},
          {"read_bytes_per_second_p50", orNull(correlator::percentile(r.read_bytes_per_s, 50))}};
}

std::optional<double> number(const nlohmann::json& j, const char* key) {
  return j.at(key).is_null() ? std::nullopt : std::optional<double>(j.at(key).get<double>());
}

}  // namespace

std::string renderText(const std::vector<JobReport>& reports) {
  std::string out;
  if (reports.empty()) return "no job with samples in the range\n";
  for (const auto& r : reports) {
    const auto& s = r.series;
    out += fmt::format("job {}  {}  ({})\n", r.job.job_id, r.job.label, r.job.key);
    out += fmt::format("  span        {} .. {}  ({} intervals)\n", timeText(s.ts_ms.front()),
                       timeText(s.ts_ms.back()), s.size());
    out += fmt::format("  judged by   {}\n", progressText(r.analysis, s));
    out += fmt::format("  goodput     {:.2f} % ", r.goodput * 100);
    std::string lost;
    for (int c = 0; c < model::kStallClassCount; ++c) {
      if (r.analysis.gpu_seconds_lost[c] > 0) {
        lost += fmt::format("{}{} {:.1f} GPU-s", lost.empty() ? "" : ", ",
                            model::toString(static_cast<model::StallClass>(c)),
                            r.analysis.gpu_seconds_lost[c]);
      }
    }
    out += lost.empty() ? "(nothing lost to stalls)\n" : "(lost: " + lost + ")\n";
    out += fmt::format("  incidents   {} ({} shorter blips not reported)\n", r.analysis.incidents.size(),
                       r.analysis.blips);
    // Said, not smoothed over: an interval that was never written is not an interval that was healthy.
    for (const auto& g : r.gaps) {
      out += fmt::format("  gap         {} .. {} ({:.0f} s): {} intervals missing (the agent stopped, or could "
                         "not write them)\n",
                         timeText(g.start_ms), timeText(g.end_ms).substr(11),
                         static_cast<double>(g.end_ms - g.start_ms) / 1000.0, g.missing_intervals);
    }
    for (const auto& inc : r.analysis.incidents) {
      out += "    " + describeIncident(inc) + "\n";
      if (const std::string ranks = correlator::rankSummary(inc); !ranks.empty()) out += "      " + ranks + "\n";
      for (const auto& e : inc.evidence) {
        if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
        out += fmt::format("      {} {:<40} baseline {:>10.3f}  during {:>10.3f}\n",
                           e.supports ? "*" : " ", e.signal, e.baseline, e.during);
      }
    }
    if (!s.ranks.empty()) {
      out += "  ranks       rank  pid      GPU            util p50    work p50  steps/s p50  data wait p50  read MB/s p50\n";
      for (const auto& rank : s.ranks) {
        const auto f = rankFigures(s, rank);
        const auto read = number(f, "read_bytes_per_second_p50");
        const auto steps = number(f, "steps_per_second_p50");
        out += fmt::format("              {:>4}  {:<8} {:<14} {:>8}  {:>10}  {:>11}  {:>13}  {:>13}\n", rank.rank, rank.pid,
                           rank.gpu.empty() ? "-" : rank.gpu.substr(0, 12), percent(number(f, "gpu_util_p50_percent")),
                           percent(number(f, "gpu_work_p50_percent")), steps ? fmt::format("{:.1f}", *steps) : "-",
                           share(number(f, "data_wait_share_p50")), read ? fmt::format("{:.1f}", *read / 1e6) : "-");
      }
    }
    out += "  devices     (per-interval await, ms)       r p50    r p99    w p50    w p99  health\n";
    bool any_health = false;
    for (const auto& d : r.devices) {
      any_health = any_health || !d.health.empty();
      out += fmt::format("    {:<36} {:>8} {:>8} {:>8} {:>8}  {}\n",
                         d.name + (d.via.empty() ? "" : " (under " + d.via + (d.also_direct ? ", and direct" : "") + ")"),
                         ms(d.r_await_p50), ms(d.r_await_p99), ms(d.w_await_p50), ms(d.w_await_p99),
                         d.health.empty() ? "-" : d.health + (d.health_evidence.empty() ? "" : " (" + d.health_evidence + ")"));
    }
    if (r.devices.empty()) out += "    (no device seen under the job's open files)\n";
    if (!any_health) out += "  health      not recorded (stallwatch record reads it every --health-interval)\n";
    out += "\n";
  }
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
    for (const auto& rank : r.series.ranks) ranks.push_back(rankFigures(r.series, rank));
    nlohmann::json gaps = nlohmann::json::array();
    for (const auto& g : r.gaps) {
      gaps.push_back({{"start_ms", g.start_ms}, {"end_ms", g.end_ms}, {"missing_intervals", g.missing_intervals}});
    }
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : r.devices) {
      devices.push_back({{"device", d.name}, {"via", d.via}, {"r_await_p50_ms", orNull(d.r_await_p50)},
                         {"r_await_p99_ms", orNull(d.r_await_p99)}, {"w_await_p50_ms", orNull(d.w_await_p50)},
                         {"w_await_p99_ms", orNull(d.w_await_p99)},
                         {"health", d.health.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.health)},
                         {"health_evidence", d.health_evidence}});
    }
    out.push_back({{"job_id", r.job.job_id},
                   {"key", r.job.key},
                   {"label", r.job.label},
                   {"start_ms", r.series.ts_ms.front()},
                   {"end_ms", r.series.ts_ms.back()},
                   {"intervals", r.series.size()},
                   {"progress_signal", model::toString(r.analysis.progress_signal)},
                   {"gpus", r.series.gpu_count},
                   {"goodput", r.goodput},
                   {"gpu_seconds_total", r.analysis.gpu_seconds_total},
                   {"gpu_seconds_lost_by_class", lost},
                   {"blips", r.analysis.blips},
                   {"incidents", incidents},
                   {"ranks", ranks},
                   {"gaps", gaps},
                   {"devices", devices}});
  }
  return out;
}

}  // namespace stallwatch::cli
