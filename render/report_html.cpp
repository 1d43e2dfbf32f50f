// The HTML report: one self-contained page (inline CSS and SVG, no network), a timeline per
// job with GPU utilisation, the implicated device's latency, I/O pressure and the dataloader's
// wait on a shared time axis, incidents shaded and labelled, then the incident list.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "render/html_timeline.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

// A device's await in an interval: the longer of its read and write await.
model::Series awaitOf(const model::DeviceSeries& d, size_t n) {
  model::Series out(n);
  for (size_t i = 0; i < n; ++i) {
    const auto a = d.r_await_ms[i], b = d.w_await_ms[i];
    out[i] = a && b ? std::max(*a, *b) : (a ? a : b);
  }
  return out;
}

// A share (0..1) as a percentage, interval by interval.
model::Series percentOf(const model::Series& share) {
  model::Series out(share.size());
  for (size_t i = 0; i < share.size(); ++i) {
    if (share[i]) out[i] = *share[i] * 100.0;
  }
  return out;
}

std::string timeline(const JobReport& r, size_t job_index) {
  const auto& s = r.series;
  // The device to show: the first disk-slow incident's, else the job's first device.
  std::string device_name;
  for (const auto& inc : r.analysis.incidents) {
    if (!inc.device.empty()) {
      device_name = inc.device;
      break;
    }
  }
  if (device_name.empty() && !r.devices.empty()) device_name = r.devices.front().name;
  model::Series latency(s.size());
  const model::DeviceSeries* shown = nullptr;
  for (const auto& d : s.devices) {
    if (d.name == device_name) {
      latency = awaitOf(d, s.size());
      shown = &d;
    }
  }
  model::Series wait_share(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto w = s.data_wait_s[i], st = s.step_s[i];
    if (w && st && *w + *st > 0) wait_share[i] = *w / (*w + *st) * 100.0;
  }
  const model::Series io = percentOf(s.io_some);
  model::Series progress = s.gpu_util_percent;
  std::string progress_title = "GPU utilisation";
  std::string progress_unit = "%";
  bool fit_progress = false;
  if (r.analysis.progress_signal == model::ProgressSignal::kSteps) {
    progress_title = "steps per second";
    progress_unit = "steps/s";
    for (size_t i = 0; i < s.size(); ++i) {
      progress[i] = s.steps[i] && s.interval_s[i] > 0
                        ? std::optional<double>(*s.steps[i] / s.interval_s[i])
                        : std::nullopt;
    }
  } else if (r.analysis.progress_signal == model::ProgressSignal::kGpuWork) {
    progress_title =
        "GPU work (GPM: the busier of tensor-core and DRAM activity; 0 while a collective waits)";
    progress = s.gpu_work_percent;
    fit_progress = true;
  } else if (r.analysis.progress_signal == model::ProgressSignal::kSlowestRankGpuUtil) {
    progress_title = "GPU utilisation of the least busy rank";
    progress = r.slowest_rank_gpu_util;
  }
  std::vector<Panel> panels = {
      {"series-progress", progress_title, progress_unit, progress, "#1f77b4", {}, "", fit_progress},
      {"series-latency",
       "await of " + (device_name.empty() ? std::string("(no device)") : device_name),
       "ms",
       latency,
       "#d62728",
       {},
       "",
       false},
      {"series-io-pressure", "I/O pressure (some)", "%", io, "#9467bd", {}, "", false},
      {"series-data-wait", "dataloader wait share", "%", wait_share, "#2ca02c", {}, "", false},
  };
  // Per I/O, where the eBPF collector ran: the tail an interval's await averages away.
  if (shown && std::any_of(shown->job_read_p99_ms.begin(), shown->job_read_p99_ms.end(),
                           [](const auto& v) { return v.has_value(); })) {
    panels.insert(
        panels.begin() + 2,
        Panel{"series-read-tail",
              "p99 of each read on " + device_name + ": the job's (solid), others' (dashed)", "ms",
              shown->job_read_p99_ms, "#8c564b", shown->others_read_p99_ms, "#c49c94", false});
  }
  // A job of one GPU judged by its steps: the GPU's utilisation in a lane of its own (issue 44: a
  // one-GPU job had none); the progress lane shows it where the GPU is the progress signal.
  if (s.ranks.empty() && s.gpu_count > 0 && progress_title != "GPU utilisation" &&
      std::any_of(s.gpu_util_percent.begin(), s.gpu_util_percent.end(),
                  [](const auto& v) { return v.has_value(); })) {
    panels.push_back({"series-gpu", "GPU utilisation, GPU work dashed", "%", s.gpu_util_percent,
                      "#7f7f7f", s.gpu_work_percent, "#bcbd22", false});
  }
  // Reads held by a limit, or waiting on storage: the job's read rate against its io.max limit
  // (dashed), the deciding figure of an io-throttled or input-storage verdict.
  const bool reads_decide =
      r.limits.run.limiter == model::Limiter::kIoThrottled ||
      r.limits.run.limiter == model::Limiter::kInputStorage ||
      std::any_of(r.analysis.incidents.begin(), r.analysis.incidents.end(),
                  [](const auto& inc) { return inc.cls == model::StallClass::kIoThrottled; });
  if (reads_decide) {
    auto mbps = [&](const model::Series& v) {
      model::Series out(s.size());
      for (size_t i = 0; i < s.size() && i < v.size(); ++i)
        if (v[i]) out[i] = *v[i] / 1e6;
      return out;
    };
    const bool limited =
        std::any_of(s.cgroup_read_limit_bytes_per_s.begin(), s.cgroup_read_limit_bytes_per_s.end(),
                    [](const auto& v) { return v && *v > 0; });
    panels.push_back(
        {"series-job-reads",
         limited ? "the job's reads (MB/s) against its io.max read limit (dashed)"
                 : "the job's reads (MB/s)",
         "MB/s", mbps(limited ? s.cgroup_limited_read_bytes_per_s : s.read_bytes_per_s), "#17becf",
         limited ? mbps(s.cgroup_read_limit_bytes_per_s) : model::Series{}, "#9467bd", true});
  }
  // One lane per rank: its GPU's utilisation (solid) and GPM work (dashed). The rank that held
  // the job back in an incident is marked; the others' utilisation stays high while they wait.
  for (const auto& rank : s.ranks) {
    bool straggler = false;
    for (const auto& inc : r.analysis.incidents)
      straggler = straggler || (inc.straggler && inc.straggler->rank == rank.rank);
    const std::string title =
        fmt::format("rank {} (pid {}{}): GPU utilisation, work dashed{}", rank.rank, rank.pid,
                    rank.gpu.empty() ? "" : ", " + rank.gpu.substr(0, 12),
                    straggler ? " \u2014 held the job back" : "");
    panels.push_back({fmt::format("series-rank-{}", rank.rank), title, "%", rank.gpu_util_percent,
                      straggler ? "#d62728" : "#7f7f7f", rank.gpu_work_percent,
                      straggler ? "#ff9896" : "#bcbd22", false});
  }
  std::vector<Shade> shades;
  for (const auto& inc : r.analysis.incidents) {
    const std::string cls = model::toString(inc.cls);
    shades.push_back({inc.start_ms, inc.end_ms, cls, describeIncident(inc),
                      cls + (inc.device.empty() ? "" : " " + inc.device)});
  }
  // The limiter's phases (its whole run where there are none).
  std::vector<Band> bands;
  const auto& phases =
      r.limits.phases.empty() ? std::vector<model::LimiterVerdict>{r.limits.run} : r.limits.phases;
  for (size_t i = 0; i < phases.size(); ++i) {
    const model::LimiterVerdict& p = phases[i];
    if (p.seconds <= 0) continue;
    bands.push_back(
        {p.start_ms, p.end_ms, model::toString(p.limiter), r.limiter_words.phases.at(i)});
  }
  return renderTimeline(s, panels, shades, job_index, bands);
}

// A latency in a table cell: "2.50 ms", or "-" without one.
std::string msCell(const std::optional<double>& v) {
  return v ? fmt::format("{:.2f} ms", *v) : std::string("-");
}

// No job in the range: the host's devices on one time axis (the I/O pressure, then each
// device's await, the busiest first), and their latency in a table.
std::string hostSection(const HostReport& host) {
  const model::JobSeries& s = host.series;
  constexpr size_t kMaxLanes = 8;
  std::string html =
      "<section class=\"host\"><h2>The host's devices</h2>\n<p class=\"no-job\">No job with "
      "samples in the range: what the host's devices did.</p>\n";
  html +=
      fmt::format("<p>{} .. {} UTC &middot; {} intervals &middot; {} device(s)</p>\n",
                  utcText(s.ts_ms.front()), utcText(s.ts_ms.back()), s.size(), s.devices.size());
  auto peak = [](const model::Series& values) {
    double top = 0;
    for (const auto& v : values) top = std::max(top, v.value_or(0.0));
    return top;
  };
  // The busiest first: the deepest queue, then the longest await (each read once).
  struct Busy {
    const model::DeviceSeries* device;
    const model::DeviceLatency* latency;
    double peak_queue, peak_await;
  };
  std::vector<Busy> order;
  for (size_t k = 0; k < s.devices.size(); ++k) {
    const model::DeviceSeries& d = s.devices[k];
    order.push_back({&d, &host.devices.at(k), peak(d.aqu_sz),
                     std::max(peak(d.r_await_ms), peak(d.w_await_ms))});
  }
  std::stable_sort(order.begin(), order.end(), [](const Busy& a, const Busy& b) {
    if (a.peak_queue != b.peak_queue) return a.peak_queue > b.peak_queue;
    return a.peak_await > b.peak_await;
  });
  const model::Series io = percentOf(s.io_some);
  std::vector<Panel> panels = {
      {"series-io-pressure", "I/O pressure (some)", "%", io, "#9467bd", {}, "", false}};
  for (size_t k = 0; k < order.size() && k < kMaxLanes; ++k) {
    panels.push_back({fmt::format("series-device-{}", k),
                      "await of " + order[k].device->name,
                      "ms",
                      awaitOf(*order[k].device, s.size()),
                      "#d62728",
                      {},
                      "",
                      false});
  }
  html += renderTimeline(s, panels, {}, 0);
  if (order.size() > kMaxLanes) {
    html +=
        fmt::format("<p>The {} busiest devices are drawn; all are in the table.</p>\n", kMaxLanes);
  }
  html +=
      "<h3>Devices</h3>\n<table class=\"devices\"><tr><th>device</th><th>read await p50</th>"
      "<th>read await p99</th><th>write await p50</th><th>write await p99</th>"
      "<th>peak queue</th></tr>\n";
  for (const auto& busy : order) {
    const model::DeviceLatency& d = *busy.latency;
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td></tr>\n",
        escape(d.name), msCell(d.r_await_p50), msCell(d.r_await_p99), msCell(d.w_await_p50),
        msCell(d.w_await_p99), busy.peak_queue);
  }
  return html + "</table></section>\n";
}

}  // namespace

std::string renderHtml(const std::vector<JobReport>& reports, const std::string& title,
                       const HostReport* host) {
  std::string html = pageStart(title);
  if (reports.empty()) {
    html += host && host->series.size() > 0 && !host->series.devices.empty()
                ? hostSection(*host)
                : "<p>No job and no device with samples in the range.</p>\n";
  }
  for (size_t j = 0; j < reports.size(); ++j) {
    const auto& r = reports[j];
    html += fmt::format("<section class=\"job\" data-job=\"{}\"><h2>Job {}: {}</h2>\n",
                        r.job.job_id, r.job.job_id, escape(r.job.label));
    html += fmt::format(
        "<p>{} .. {} UTC &middot; {} &middot; goodput {} &middot; {} incident(s), "
        "{} blip(s)</p>\n",
        utcText(r.series.ts_ms.front()), utcText(r.series.ts_ms.back()), escape(r.job.key),
        r.goodput.share ? fmt::format("<b>{:.1f} %</b> <small>{}</small>", *r.goodput.share * 100,
                                      escape(goodputLost(r.goodput, r.analysis)))
                        : "<b>unknown</b> (" + escape(r.goodput.unknown_because) + ")",
        r.analysis.incidents.size(), r.analysis.blips);
    // What limits it when nothing has gone wrong, and what to do about it.
    const model::LimiterVerdict& v = r.limits.run;
    html += fmt::format(
        "<p class=\"limiter\" data-limiter=\"{}\">limiter <b>{}</b> &middot; {}</p>\n",
        model::toString(v.limiter), model::toString(v.limiter), escape(r.limiter_words.run));
    if (!v.advice.empty()) {
      html += "<ul class=\"advice\">";
      for (const auto& a : v.advice) html += "<li>" + escape(a.text) + "</li>";
      html += "</ul>\n";
    }
    html += timeline(r, j);
    html += "<h3>Stalls</h3>\n";
    if (r.analysis.incidents.empty()) {
      html += "<p class=\"no-incidents\">No stall in this job's span.</p>\n";
    } else {
      html +=
          "<table class=\"incidents\"><tr><th>when "
          "(UTC)</th><th>class</th><th>device</th><th>ranks</th><th>idle</th>"
          "<th>GPU-s lost</th><th>confidence</th><th>evidence (baseline &rarr; during)</th></tr>\n";
    }
    for (size_t k = 0; k < r.analysis.incidents.size(); ++k) {
      const model::Incident& inc = r.analysis.incidents[k];
      const std::string evidence = evidenceCell(inc.evidence);
      const std::string& ranks = r.incident_ranks.at(k);
      html += fmt::format(
          "<tr><td>{} .. {}</td><td>{}</td><td>{}</td><td class=\"ranks\">{}</td><td>{:.0f} %</td>"
          "<td>{:.1f}</td><td>{:.2f}</td><td class=\"evidence\">{}</td></tr>\n",
          utcText(inc.start_ms), utcText(inc.end_ms).substr(11), model::toString(inc.cls),
          escape(inc.device + (inc.physical_device.empty() ? "" : " on " + inc.physical_device)),
          ranks.empty() ? "-" : escape(ranks), inc.idle_share * 100, inc.gpu_seconds_lost,
          inc.confidence, evidence);
    }
    if (!r.analysis.incidents.empty()) html += "</table>\n";
    html +=
        "<h3>Devices the job read</h3>\n<table class=\"devices\"><tr><th>device</th>"
        "<th>read await p50</th><th>read await p99</th><th>write await p50</th>"
        "<th>write await p99</th><th>drive health</th></tr>\n";
    for (const auto& d : r.devices) {
      html += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
          escape(d.name + (d.via.empty() ? "" : " (under " + d.via + ")")), msCell(d.r_await_p50),
          msCell(d.r_await_p99), msCell(d.w_await_p50), msCell(d.w_await_p99),
          escape(d.health.empty()
                     ? "not recorded"
                     : d.health + (d.health_evidence.empty() ? "" : ": " + d.health_evidence)));
    }
    html += "</table></section>\n";
  }
  html += pageEnd();
  return html;
}

}  // namespace stallwatch::render
