#include "cli/html_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/report.h"

namespace stallwatch::cli {
namespace {

constexpr double kWidth = 1100, kLeft = 70, kRight = 20, kPanelHeight = 110, kGap = 28;
constexpr size_t kMaxPoints = 1500;

// An SVG path through the values, bucketed to at most kMaxPoints, broken where data is missing.
std::string pathFor(const model::JobSeries& s, const model::Series& v, double y0, double y_max,
                    double t0, double t1) {
  const size_t n = s.size();
  const size_t bucket = std::max<size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
  std::string d;
  bool pen = false;
  const double plot_w = kWidth - kLeft - kRight;
  for (size_t start = 0; start < n; start += bucket) {
    double sum = 0;
    size_t count = 0;
    for (size_t i = start; i < std::min(n, start + bucket); ++i) {
      if (i < v.size() && v[i]) {
        sum += *v[i];
        ++count;
      }
    }
    if (!count) {
      pen = false;
      continue;
    }
    const double t = static_cast<double>(s.ts_ms[std::min(n - 1, start + bucket / 2)]);
    const double x = kLeft + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * plot_w;
    const double value = std::clamp(sum / static_cast<double>(count), 0.0, y_max);
    const double y = y0 + kPanelHeight - value / y_max * kPanelHeight;
    d += fmt::format("{}{:.1f},{:.1f} ", pen ? "L" : "M", x, y);
    pen = true;
  }
  return d;
}

}  // namespace

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string pageStart(const std::string& title, const std::string& extra_css) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
         escape(title) +
         "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;font-size:"
         "13px}th{background:#f4f4f4}.supports{font-weight:bold;color:#b00}h2{margin-top:32px}" +
         extra_css + "</style>\n</head><body>\n<h1>" + escape(title) + "</h1>\n";
}

std::string pageEnd() {
  return "<script>document.body.dataset.rendered = "
         "document.querySelectorAll('svg.timeline').length + ' timelines';</script>\n"
         "</body></html>\n";
}

std::string readableSignal(const std::string& signal) {
  // The signal's first word says what it is; the rest names the device, rank or node.
  static const std::pair<const char*, const char*> kNames[] = {
      {"await_ms", "await (ms)"},
      {"aqu_sz", "queue length (aqu-sz)"},
      {"io_some", "I/O pressure: share of time some task waited"},
      {"cpu_some", "CPU pressure: share of time some task waited"},
      {"memory_some", "memory pressure: share of time some task waited (reclaim)"},
      {"job_write_bytes_per_s", "the job's writes (bytes/s)"},
      {"job_read_bytes_per_s", "the job's reads (bytes/s)"},
      {"neighbour_bytes_per_s", "another cgroup's reads and writes on it (bytes/s)"},
      {"job_d_state_threads", "the job's threads in uninterruptible I/O wait"},
      {"workers_cpu", "dataloader workers' CPU (cores)"},
      {"gpu_util_percent", "GPU utilisation (%)"},
      {"data_wait_share", "share of the loop waiting for data"},
      {"baseline_intervals", "healthy intervals before it to compare with"},
  };
  const size_t space = signal.find(' ');
  const std::string head = signal.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : signal.substr(space + 1);
  for (const auto& [name, readable] : kNames) {
    if (head == name) return rest.empty() ? readable : rest + ": " + readable;
  }
  return signal;
}

std::string evidenceCell(const std::vector<model::EvidenceItem>& evidence) {
  std::string out;
  for (const auto& e : evidence) {
    if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
    out += fmt::format("<div class=\"{}\" title=\"{}\">{}: {:.3g} &rarr; {:.3g}</div>",
                       e.supports ? "supports" : "", escape(e.signal),
                       escape(readableSignal(e.signal)), e.baseline, e.during);
  }
  return out;
}

std::string renderTimeline(const model::JobSeries& s, const std::vector<Panel>& panels,
                           const std::vector<Shade>& shades, size_t index) {
  const size_t job_index = index;
  const double t0 = static_cast<double>(s.ts_ms.front()) - s.interval_s.front() * 1000.0;
  const double t1 = static_cast<double>(s.ts_ms.back());
  const double height = static_cast<double>(panels.size()) * (kPanelHeight + kGap) + 30;
  std::string svg = fmt::format(
      "<svg class=\"timeline\" id=\"timeline-{}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"100%\" viewBox=\"0 0 {} {}\" preserveAspectRatio=\"xMinYMin meet\" "
      "style=\"max-width:{}px\">\n",
      job_index, kWidth, height, kWidth);
  const double plot_w = kWidth - kLeft - kRight;
  auto xOf = [&](double t) { return kLeft + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * plot_w; };
  // Incidents first, under the lines, across every panel.
  for (const auto& shade : shades) {
    const double x0 = xOf(static_cast<double>(shade.start_ms));
    const double x1 = std::max(x0 + 2, xOf(static_cast<double>(shade.end_ms)));
    svg += fmt::format(
        "<rect class=\"incident\" data-class=\"{}\" x=\"{:.1f}\" y=\"10\" width=\"{:.1f}\" "
        "height=\"{:.1f}\" "
        "fill=\"{}\" fill-opacity=\"0.18\"><title>{}</title></rect>\n",
        shade.cls, x0, x1 - x0, height - 40, shade.cls == "disk-slow" ? "#d62728" : "#ff7f0e",
        escape(shade.tooltip));
    svg += fmt::format(
        "<text class=\"incident-label\" x=\"{:.1f}\" y=\"22\" font-size=\"12\">{}</text>\n", x0 + 3,
        escape(shade.label));
  }
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    const double y0 = 30 + static_cast<double>(p) * (kPanelHeight + kGap);
    // Shares have a natural top of 100 %, the rest scale to their data; a share above 100 %
    // (a wait longer than the interval it is reported in) raises the top rather than being cut.
    const bool share = panel.unit == "%" && !panel.fit;
    double y_max = share ? 100.0 : 1.0;
    for (const auto& v : panel.values) {
      if (v && (!share || *v > 100.0)) y_max = std::max(y_max, *v * (share ? 1.05 : 1.1));
    }
    svg +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                    kLeft, y0 - 6, escape(panel.title));
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n",
        kLeft, y0, plot_w, kPanelHeight);
    // Gridlines at quarters of the scale, each labelled; the unit beside the top one; the
    // time ticks' verticals through every panel.
    for (int q = 0; q <= 4; ++q) {
      const double y = y0 + kPanelHeight - kPanelHeight * q / 4.0;
      if (q > 0 && q < 4) {
        svg += fmt::format(
            "<line class=\"grid\" x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
            "stroke=\"#eee\"/>\n",
            kLeft, kLeft + plot_w, y, y);
      }
      svg += fmt::format(
          "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:.3g}{}</text>\n",
          kLeft - 4, q == 4 ? y + 10 : y + 4, y_max * q / 4.0,
          q == 4 ? " " + escape(panel.unit) : std::string());
    }
    for (int k = 1; k < 4; ++k) {
      const double x = kLeft + plot_w * k / 4.0;
      svg += fmt::format(
          "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
          "stroke=\"#eee\"/>\n",
          x, x, y0, y0 + kPanelHeight);
    }
    svg += fmt::format(
        "<path id=\"{}-{}\" class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" "
        "stroke=\"{}\" stroke-width=\"1.3\"/>\n",
        panel.id, job_index, panel.id, pathFor(s, panel.values, y0, y_max, t0, t1), panel.color);
    if (!panel.second.empty()) {
      svg += fmt::format(
          "<path class=\"series second\" data-series=\"{}-work\" d=\"{}\" fill=\"none\" "
          "stroke=\"{}\" stroke-width=\"1.3\" stroke-dasharray=\"4 3\"/>\n",
          panel.id, pathFor(s, panel.second, y0, y_max, t0, t1), panel.second_color);
    }
  }
  for (int k = 0; k <= 4; ++k) {
    const double t = t0 + (t1 - t0) * k / 4.0;
    const char* anchor = k == 0 ? "start" : (k == 4 ? "end" : "middle");
    svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"{}\">{}</text>\n", xOf(t),
        height - 8, anchor, timeText(static_cast<int64_t>(t)).substr(11));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">UTC</text>\n",
      kLeft - 4, height - 8);
  return svg + "</svg>\n";
}

}  // namespace stallwatch::cli
