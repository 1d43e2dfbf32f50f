// The post-mortem report as text: a job's span, what judged it, its goodput and what limited it,
// its incidents with their evidence, its ranks and devices.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/text.h"
#include "common/time_zone.h"
#include "common/units.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {
using Metric = model::EvidenceMetric;

std::string ms(const std::optional<double>& v) { return v ? fmt::format("{:.2f}", *v) : "-"; }

std::string progressText(const model::Analysis& a, const model::JobSeries& s) {
  switch (a.progress_signal) {
    case model::ProgressSignal::kNone:
      return "nothing (no GPU readings, no dataloader reports)";
    case model::ProgressSignal::kSteps:
      return "dataloader steps per second";
    case model::ProgressSignal::kGpuWork:
      return fmt::format("GPU work (GPM tensor/DRAM activity) of {} GPU(s)", s.gpu_count);
    case model::ProgressSignal::kSlowestRankGpuUtil:
      return fmt::format("GPU utilisation of the least busy of {} ranks (no GPM on these GPUs)",
                         s.ranks.size());
    case model::ProgressSignal::kGpuUtil:
      break;
  }
  return fmt::format("GPU utilisation of {} GPU(s)", s.gpu_count);
}

std::string share(const std::optional<double>& v) {
  return v ? fmt::format("{:.0f} %", *v * 100) : "-";
}
std::string percent(const std::optional<double>& v) {
  return v ? fmt::format("{:.0f} %", *v) : "-";
}

}  // namespace

std::string timeText(int64_t t_ms) {
  const tm shown = common::brokenDown(static_cast<time_t>(t_ms / 1000));
  char buffer[64];
  // The zone said: its abbreviation (CET, UTC), or "UTC" with --utc (gmtime's own says GMT).
  std::strftime(buffer, sizeof buffer,
                common::timesInUtc() ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M:%S %Z", &shown);
  return buffer;
}

std::string utcText(int64_t t_ms) {
  const time_t t = static_cast<time_t>(t_ms / 1000);
  tm utc{};
  gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &utc);
  return buffer;
}

std::string describeIncident(const model::Incident& inc) {
  std::string where;
  if (!inc.device.empty()) {
    where =
        " " + inc.device + (inc.physical_device.empty() ? "" : " (on " + inc.physical_device + ")");
  }
  return fmt::format(
      "{} .. {} ({:.0f} s)  {}{}  idle {:.0f} %  {:.1f} GPU-s lost  confidence {:.2f}",
      timeText(inc.start_ms), timeText(inc.end_ms).substr(11),
      static_cast<double>(inc.end_ms - inc.start_ms) / 1000.0, model::toString(inc.cls), where,
      inc.idle_share * 100, inc.gpu_seconds_lost, inc.confidence);
}

std::string goodputLost(const model::Goodput& g, const model::Analysis& a) {
  const char* unit = a.gpu_seconds_total > 0 ? "GPU-s" : "s";
  std::string lost;
  for (int c = 0; c < model::kStallClassCount; ++c) {
    if (a.gpu_seconds_lost[c] > 0) {
      lost += fmt::format("{}{} {:.1f} {}", lost.empty() ? "" : ", ",
                          model::toString(static_cast<model::StallClass>(c)), a.gpu_seconds_lost[c],
                          unit);
    }
  }
  if (lost.empty() && g.stall_gpu_seconds > 0)
    lost = fmt::format("stalls {:.1f} {}", g.stall_gpu_seconds, unit);
  if (g.input_wait_gpu_seconds > 0) {
    lost += fmt::format("{}waiting for input outside incidents {:.1f} {}", lost.empty() ? "" : "; ",
                        g.input_wait_gpu_seconds, unit);
  }
  std::string out = lost.empty() ? "(nothing lost" : "(lost: " + lost;
  if (*g.input_wait_not_counted)
    out += fmt::format("; wait for input not counted: {}", g.input_wait_not_counted);
  return out + ")";
}

std::string goodputText(const model::Goodput& g, const model::Analysis& a) {
  if (!g.share) return fmt::format("unknown: {}", g.unknown_because);
  return fmt::format("{:.2f} % {}", *g.share * 100, goodputLost(g, a));
}

std::string limiterLines(const model::JobLimits& limits, const model::LimiterWords& words) {
  const model::LimiterVerdict& v = limits.run;
  std::string out = "  limiter     " + words.run + "\n";
  if (v.limiter == model::Limiter::kUnknown) return out;
  out += fmt::format(
      "              over {:.0f} s {}, confidence {:.2f}, input wait from {}{}\n", v.seconds,
      v.incidents_included_share
          ? fmt::format("with its incidents (they covered {:.0f} % of the run: too much to "
                        "judge the rest alone)",
                        *v.incidents_included_share * 100)
          : std::string("outside incidents"),
      v.confidence,
      v.wait_source == model::WaitSource::kHook      ? "the dataloader hook"
      : v.wait_source == model::WaitSource::kSampled ? "where the main thread slept (no hook)"
                                                     : "the main thread and the GPU (no hook)",
      limits.slowest_rank ? fmt::format("; rank {} waited most", *limits.slowest_rank) : "");
  std::string figures;
  for (const auto& f : v.figures) {
    figures += fmt::format("{}{}{} {:.3g}", figures.empty() ? "" : ", ", f.decides ? "*" : "",
                           f.name(), f.value);
  }
  if (!figures.empty()) out += "              " + figures + "\n";
  for (const auto& a : v.advice) out += "    advice    " + a.text + "\n";
  if (limits.phases.size() > 1) {
    for (size_t i = 0; i < limits.phases.size(); ++i) {
      const model::LimiterVerdict& p = limits.phases[i];
      out += fmt::format("    phase     {} .. {}  {}\n", timeText(p.start_ms),
                         timeText(p.end_ms).substr(11), words.phases.at(i));
    }
  }
  for (size_t i = 0; i < limits.ranks.size(); ++i) {
    out += fmt::format("    rank {:<4} {}\n", limits.ranks[i].rank, words.ranks.at(i));
  }
  return out;
}

std::string renderHostText(const HostReport& host) {
  const model::JobSeries& s = host.series;
  std::string out = "no job with samples in the range\n";
  if (s.size() == 0 || s.devices.empty()) return out;
  out += fmt::format("the host's devices, {} .. {} ({} intervals): await p50 / p99\n",
                     timeText(s.ts_ms.front()), timeText(s.ts_ms.back()), s.size());
  auto ms = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.2f}", *v) : std::string("-");
  };
  for (const model::DeviceLatency& d : host.devices) {
    out += fmt::format("  {:<16} read {} / {} ms, write {} / {} ms\n", d.name, ms(d.r_await_p50),
                       ms(d.r_await_p99), ms(d.w_await_p50), ms(d.w_await_p99));
  }
  return out;
}

namespace {

// The stretches that are not stalls, each said with why: idle at the job's exit, a phase
// outside the training loop, a standing limit, and intervals never written.
std::string phaseLines(const JobReport& r) {
  std::string out;
  if (const auto& idle = r.analysis.idle_at_exit) {
    const std::string what =
        idle->processes_idle
            ? fmt::format("did nothing (workers {:.2f} cores, reads {:.1f} MB/s)",
                          idle->workers_cpu, idle->read_bytes_per_s / 1e6)
            : fmt::format(
                  "wound down (main process {:.2f} cores, workers {:.2f}, reads {:.1f} MB/s, "
                  "writes {:.1f} MB/s; none stopped or stuck on I/O)",
                  idle->main_cpu, idle->workers_cpu, idle->read_bytes_per_s / 1e6,
                  idle->write_bytes_per_s / 1e6);
    out += fmt::format(
        "  idle at exit {:.0f} s ({} .. {}): after its last progress the job's GPUs sat idle "
        "while its processes {} until they exited; not a stall\n",
        static_cast<double>(idle->end_ms - idle->start_ms) / 1000.0, timeText(idle->start_ms),
        timeText(idle->end_ms).substr(11), what);
  }
  for (const auto& w : r.analysis.outside_loop) {
    out += fmt::format(
        "  no steps    {:.0f} s ({} .. {}): the job sent no step while its workers kept working "
        "({:.2f} cores, {:.1f} MB/s read; before: {:.2f} cores, {:.1f} MB/s){}: a phase outside "
        "its training loop, such as an evaluation; not a stall\n",
        static_cast<double>(w.end_ms - w.start_ms) / 1000.0, timeText(w.start_ms),
        timeText(w.end_ms).substr(11), w.workers_cpu, w.read_bytes_per_s / 1e6,
        w.workers_cpu_before, w.read_bytes_per_s_before / 1e6,
        w.gpu_share
            ? fmt::format(", its GPUs at {:.0f} % of their training work", *w.gpu_share * 100)
            : std::string());
  }
  for (const auto& w : r.analysis.standing) {
    out += fmt::format(
        "  standing    {:.0f} s ({} .. {}): below the job's pace ({}), but {}: the limiter "
        "above judges it with the rest of the run; not an incident\n",
        static_cast<double>(w.end_ms - w.start_ms) / 1000.0, timeText(w.start_ms),
        timeText(w.end_ms).substr(11), model::toString(w.cls),
        w.no_baseline ? "a read limit held the job's reads through it from the job's start, "
                        "with no healthy pace before it to be worse than"
                      : "the read limit held the job's reads as much before it");
  }
  // Said, not smoothed over: an interval that was never written is not an interval that was
  // healthy.
  for (const auto& g : r.gaps) {
    out += fmt::format(
        "  gap         {} .. {} ({:.0f} s): {} intervals missing (the agent stopped, or could "
        "not write them)\n",
        timeText(g.start_ms), timeText(g.end_ms).substr(11),
        static_cast<double>(g.end_ms - g.start_ms) / 1000.0, g.missing_intervals);
  }
  return out;
}

// The Kth incident of R: its line, what serves its device, and its evidence in words (who else used
// the device, the per-I/O tail, a hang, a checkpoint), then figure by figure.
std::string incidentLines(const JobReport& r, size_t k) {
  const model::Incident& inc = r.analysis.incidents[k];
  std::string out;
  out += "    " + describeIncident(inc) + "\n";
  for (const auto* target : {&inc.device, &inc.physical_device}) {
    if (auto it = r.served_by.find(*target); it != r.served_by.end())
      out += "      " + *target + " is " + it->second + "\n";
  }
  // Who else used the device, in words: "loop0 was also serving /neighbour at 180.0 MB/s".
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kNeighbourBytesPerS) continue;
    out += fmt::format("      {} was also serving {} at {:.1f} MB/s (before: {:.1f} MB/s)\n",
                       e.name.subject, e.name.note, e.during / 1e6, e.baseline / 1e6);
  }
  // Per I/O (the eBPF collector's): the tail of the job's own reads beside everyone
  // else's on the device, and how much of its reading was others'.
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kJobReadP99Ms) continue;
    const std::string& device = e.name.subject;
    std::string line = fmt::format("      {}: the job's reads p99 {:.3g} ms (before: {:.3g})",
                                   device, e.during, e.baseline);
    for (const auto& o : inc.evidence) {
      if (o.name.subject != device) continue;
      if (o.name.metric == Metric::kOthersReadP99Ms && o.during > 0)
        line += fmt::format(", others' {:.3g} ms (before: {:.3g})", o.during, o.baseline);
      if (o.name.metric == Metric::kOthersShareOfReads)
        line += fmt::format("; others made {:.0f} % of its reads (before: {:.0f} %)",
                            o.during * 100, o.baseline * 100);
    }
    out += line + "\n";
  }
  // A hang with processes stopped: who was stopped, and where the main process waited.
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kJobProcessesStopped || !e.supports) continue;
    std::string waited;
    for (const auto& w : inc.evidence) {
      if (w.name.metric == Metric::kMainProcessAsleep) waited = w.name.note;
    }
    out += fmt::format("      hang: {:.0f} of the job's processes stopped (T) for {:.0f} s{}\n",
                       e.during, static_cast<double>(inc.end_ms - inc.start_ms) / 1000.0,
                       waited.empty() ? "" : "; the main process waited " + waited);
  }
  // A checkpoint slowed by its device, or held by its write limit, in words.
  bool held = false;
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kCheckpointHeldByWriteLimit || !e.supports) continue;
    held = true;
    out += fmt::format("      the checkpoint was held by its write limit, {}: it wrote {}\n",
                       e.name.note, common::mibPerSecondText(e.during));
  }
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kCheckpointSlowedByAwaitMs || (held && !e.supports)) continue;
    out += e.supports
               ? fmt::format("      the checkpoint was slowed by {}: await {:.1f} -> {:.1f} ms\n",
                             e.name.subject, e.baseline, e.during)
               : fmt::format(
                     "      {} kept its pace under the checkpoint: await {:.1f} -> {:.1f} ms\n",
                     e.name.subject, e.baseline, e.during);
  }
  // A hang: what the idle processes waited on, in words.
  for (const auto& e : inc.evidence) {
    if (e.name.metric != Metric::kJobProcessesIdle) continue;
    out += "      the job's processes sat idle (no CPU, no reads, no I/O wait)";
    out += !e.name.note.empty() ? fmt::format(": its main thread {} ({:.0f} % of the stall)\n",
                                              e.name.note, e.during * 100)
                                : "\n";
  }
  if (const std::string& ranks = r.incident_ranks.at(k); !ranks.empty())
    out += "      " + ranks + "\n";
  for (const auto& e : inc.evidence) {
    if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
    out += fmt::format("      {} {:<40} baseline {:>10.3f}  during {:>10.3f}\n",
                       e.supports ? "*" : " ", e.signal, e.baseline, e.during);
  }
  return out;
}

// The job's ranks, its devices with their latency and health, and every I/O's latency.
std::string rankAndDeviceLines(const JobReport& r) {
  std::string out;
  if (!r.ranks.empty()) {
    out +=
        "  ranks       rank  pid      GPU            util p50    work p50  steps/s p50  data "
        "wait p50  read MB/s p50\n";
    for (const auto& f : r.ranks) {
      const auto& read = f.read_bytes_per_second_p50;
      const auto& steps = f.steps_per_second_p50;
      out += fmt::format(
          "              {:>4}  {:<8} {:<14} {:>8}  {:>10}  {:>11}  {:>13}  {:>13}\n", f.rank,
          f.pid, f.gpu.empty() ? "-" : f.gpu.substr(0, 12), percent(f.gpu_util_p50_percent),
          percent(f.gpu_work_p50_percent), steps ? fmt::format("{:.1f}", *steps) : "-",
          share(f.data_wait_share_p50), read ? fmt::format("{:.1f}", *read / 1e6) : "-");
    }
  }
  out += "  devices     (per-interval await, ms)       r p50    r p99    w p50    w p99  health\n";
  bool any_health = false;
  for (const auto& d : r.devices) {
    any_health = any_health || !d.health.empty();
    out += fmt::format(
        "    {:<36} {:>8} {:>8} {:>8} {:>8}  {}\n",
        d.name +
            (d.via.empty() ? "" : " (under " + d.via + (d.also_direct ? ", and direct" : "") + ")"),
        ms(d.r_await_p50), ms(d.r_await_p99), ms(d.w_await_p50), ms(d.w_await_p99),
        d.health.empty()
            ? "-"
            : d.health + (d.health_evidence.empty() ? "" : " (" + d.health_evidence + ")"));
    if (!d.served_by.empty()) out += "      " + d.served_by + "\n";
    if (d.served_by.rfind("nfs:", 0) == 0) {
      out +=
          "      (the kernel counts NFS per RPC client: mounts of one server with the same "
          "options show the same figures)\n";
    }
  }
  if (r.devices.empty()) out += "    (no device seen under the job's open files)\n";
  if (!r.io_latency.empty()) {
    out += "  per-I/O     (every I/O's latency, eBPF; the job's own and everyone else's)\n";
    for (const auto& l : r.io_latency) {
      out += fmt::format("    {:<12} {:<7} {:>9} I/Os  {}\n", l.device, l.op, l.all_count,
                         ioLatencyText(l.all));
      if (l.job_count > 0 && l.others_count > 0) {
        out += fmt::format("      the job's {} I/Os: {}; others' {}: {}\n", l.job_count,
                           ioLatencyText(l.job), l.others_count, ioLatencyText(l.others));
      }
    }
  }
  if (!any_health)
    out += "  health      not recorded (stallwatch record reads it every --health-interval)\n";
  return out;
}

}  // namespace

std::string renderText(const std::vector<JobReport>& reports) {
  std::string out;
  if (reports.empty()) return "no job with samples in the range\n";
  for (const auto& r : reports) {
    const auto& s = r.series;
    out += fmt::format("job {}  {}  ({})\n", r.job.job_id, common::printable(r.job.label),
                       common::printable(r.job.key));
    out += fmt::format("  span        {} .. {}  ({} intervals)\n", timeText(s.ts_ms.front()),
                       timeText(s.ts_ms.back()), s.size());
    out += fmt::format("  judged by   {}\n", progressText(r.analysis, s));
    if (!r.job.cgroup_limits.empty()) out += "  limits      " + r.job.cgroup_limits + "\n";
    out += "  goodput     " + goodputText(r.goodput, r.analysis) + "\n";
    out += limiterLines(r.limits, r.limiter_words);
    out += fmt::format("  incidents   {} ({} shorter blips not reported)\n",
                       r.analysis.incidents.size(), r.analysis.blips);
    out += phaseLines(r);
    for (size_t k = 0; k < r.analysis.incidents.size(); ++k) out += incidentLines(r, k);
    out += rankAndDeviceLines(r);
    out += "\n";
  }
  return out;
}

std::string ioLatencyText(const model::IoLatencySlots& slots) {
  const auto p50 = model::ioLatencyQuantileMs(slots, 0.5);
  if (!p50) return "";
  return fmt::format("p50 {:.3f}  p99 {:.3f}  p99.9 {:.3f} ms", *p50,
                     model::ioLatencyQuantileMs(slots, 0.99).value_or(0),
                     model::ioLatencyQuantileMs(slots, 0.999).value_or(0));
}

}  // namespace stallwatch::render
