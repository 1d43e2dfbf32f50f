#include "render/html_timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/text.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

constexpr double kWidth = 1100, kLeft = 70, kRight = 20, kPanelHeight = 110, kGap = 28;
constexpr size_t kMaxPoints = 1500;

// The series bucketed to at most kMaxPoints: each bucket's time (its middle interval's) and
// mean (none where no interval of it has a value). The SVG paths and the page's script (hover,
// zoom) draw the same points.
struct Buckets {
  size_t size = 1;  // intervals per bucket
  std::vector<double> times;
};

Buckets bucketsOf(const model::JobSeries& s) {
  Buckets b;
  const size_t n = s.size();
  b.size = std::max<size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
  for (size_t start = 0; start < n; start += b.size)
    b.times.push_back(static_cast<double>(s.ts_ms[std::min(n - 1, start + b.size / 2)]));
  return b;
}

std::vector<std::optional<double>> bucketMeans(const Buckets& b, const PanelValues& v) {
  std::vector<std::optional<double>> out;
  for (size_t k = 0; k < b.times.size(); ++k) {
    double sum = 0;
    size_t count = 0;
    for (size_t i = k * b.size; i < (k + 1) * b.size && i < v.size(); ++i) {
      if (const auto value = v[i]) {
        sum += *value;
        ++count;
      }
    }
    out.push_back(count ? std::optional<double>(sum / static_cast<double>(count)) : std::nullopt);
  }
  return out;
}

// An SVG path through the bucket means, broken where data is missing.
std::string pathFor(const Buckets& b, const std::vector<std::optional<double>>& means, double y0,
                    double y_max, double t0, double t1) {
  std::string d;
  bool pen = false;
  const double plot_w = kWidth - kLeft - kRight;
  for (size_t k = 0; k < means.size(); ++k) {
    if (!means[k]) {
      pen = false;
      continue;
    }
    const double x = kLeft + (t1 > t0 ? (b.times[k] - t0) / (t1 - t0) : 0) * plot_w;
    const double value = std::clamp(*means[k], 0.0, y_max);
    const double y = y0 + kPanelHeight - value / y_max * kPanelHeight;
    d += fmt::format("{}{:.1f},{:.1f} ", pen ? "L" : "M", x, y);
    pen = true;
  }
  return d;
}

nlohmann::json meansJson(const std::vector<std::optional<double>>& means) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : means)
    out.push_back(m ? nlohmann::json(std::round(*m * 1000) / 1000) : nullptr);
  return out;
}

// What the page's script needs to redraw a timeline (zoom) and read values (hover).
// "</" is escaped: a title may hold anything, and this sits inside a <script> element.
std::string timelineData(const nlohmann::json& data, size_t index) {
  std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3))
    text.replace(at, 2, "<\\/");
  return fmt::format("<script type=\"application/json\" id=\"timeline-data-{}\">{}</script>\n",
                     index, text);
}

// Hover shows every panel's value at the pointer's time under the timeline; a drag zooms to
// a span, a double click zooms back out; #from=MS&to=MS zooms and #at=MS points at a moment
// when the page opens (a link to a moment of a stall). Plain DOM, nothing fetched.
constexpr const char* kTimelineScript = R"JS(<script>
(function () {
  const ns = 'http://www.w3.org/2000/svg';
  const hhmmss = ms => new Date(ms).toISOString().substring(11, 19);
  const num = v => Math.abs(v) >= 100 ? v.toFixed(0) : String(+v.toPrecision(3));
  const hash = new URLSearchParams(location.hash.slice(1));
  document.querySelectorAll('svg.timeline').forEach(svg => {
    const source = document.getElementById(svg.id.replace('timeline-', 'timeline-data-'));
    if (!source) return;
    const data = JSON.parse(source.textContent);
    const full = [data.t0, data.t1];
    let view = full.slice();
    const right = data.left + data.width;
    const xOf = t => data.left + (t - view[0]) / (view[1] - view[0]) * data.width;
    const tOf = x => view[0] + (x - data.left) / data.width * (view[1] - view[0]);
    const path = (values, p) => {
      let d = '', pen = false;
      data.times.forEach((t, k) => {
        const v = values[k];
        if (v === null || t < view[0] || t > view[1]) { pen = false; return; }
        const y = p.y0 + p.h - Math.min(Math.max(v, 0), p.ymax) / p.ymax * p.h;
        d += (pen ? 'L' : 'M') + xOf(t).toFixed(1) + ',' + y.toFixed(1) + ' ';
        pen = true;
      });
      return d;
    };
    const draw = () => {
      data.panels.forEach(p => {
        document.getElementById(p.id).setAttribute('d', path(p.values, p));
        if (p.second) document.getElementById(p.second_id).setAttribute('d', path(p.second, p));
      });
      svg.querySelectorAll('.incident, .incident-label').forEach(e => {
        const a = Math.max(xOf(+e.dataset.start), data.left);
        const b = Math.min(xOf(+e.dataset.end), right);
        e.style.display = b < data.left || a > right ? 'none' : '';
        if (e.tagName === 'rect') {
          e.setAttribute('x', a.toFixed(1));
          e.setAttribute('width', Math.max(2, b - a).toFixed(1));
        } else {
          e.setAttribute('x', (a + 3).toFixed(1));
        }
      });
      svg.querySelectorAll('text.tick').forEach(e => {
        e.textContent = hhmmss(view[0] + (view[1] - view[0]) * e.dataset.k / 4);
      });
      svg.dataset.view = view.map(Math.round).join(',');
    };
    const make = (name, attrs) => {
      const e = document.createElementNS(ns, name);
      Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
      e.style.display = 'none';
      svg.appendChild(e);
      return e;
    };
    const cursor = make('line', {class: 'cursor', y1: 10, y2: data.bottom, stroke: '#555'});
    const band = make('rect', {class: 'zoom-band', y: 10, height: data.bottom - 10,
                               fill: '#1f77b4', 'fill-opacity': 0.15});
    const tip = document.createElement('div');
    tip.className = 'hover';
    svg.after(tip);
    const pointAt = t => {
      let lo = 0, hi = data.times.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (data.times[mid] < t) lo = mid + 1; else hi = mid;
      }
      if (lo > 0 && t - data.times[lo - 1] < data.times[lo] - t) lo -= 1;
      const x = xOf(data.times[lo]).toFixed(1);
      cursor.setAttribute('x1', x);
      cursor.setAttribute('x2', x);
      cursor.style.display = '';
      tip.textContent = hhmmss(data.times[lo]) + ' UTC — ' + data.panels.map(p =>
        p.title + ': ' + (p.values[lo] === null ? '-' : num(p.values[lo]) + ' ' + p.unit)).join(' · ');
      svg.dataset.at = data.times[lo];
    };
    const timeOf = ev => {
      const pt = svg.createSVGPoint();
      pt.x = ev.clientX;
      pt.y = ev.clientY;
      return tOf(Math.min(Math.max(pt.matrixTransform(svg.getScreenCTM().inverse()).x, data.left), right));
    };
    let from = null;
    svg.addEventListener('mousemove', ev => {
      const t = timeOf(ev);
      pointAt(t);
      if (from === null) return;
      band.setAttribute('x', Math.min(xOf(from), xOf(t)).toFixed(1));
      band.setAttribute('width', Math.abs(xOf(t) - xOf(from)).toFixed(1));
      band.style.display = '';
    });
    svg.addEventListener('mousedown', ev => { from = timeOf(ev); ev.preventDefault(); });
    svg.addEventListener('mouseup', ev => {
      const t = timeOf(ev);
      if (from !== null && Math.abs(xOf(t) - xOf(from)) > 5) {
        view = [Math.min(t, from), Math.max(t, from)];
        draw();
      }
      from = null;
      band.style.display = 'none';
    });
    svg.addEventListener('dblclick', () => { view = full.slice(); draw(); });
    const a = +hash.get('from'), b = +hash.get('to');
    if (a && b && b > a) view = [Math.max(a, full[0]), Math.min(b, full[1])];
    draw();
    if (hash.get('at')) pointAt(+hash.get('at'));
  });
})();
</script>
)JS";

}  // namespace

size_t PanelValues::size() const {
  return std::visit([](const auto& v) { return v.size(); }, values_);
}

std::optional<double> PanelValues::operator[](size_t i) const {
  if (const auto* series = std::get_if<model::Series>(&values_)) return model::at(*series, i);
  const auto& column = std::get<std::span<const float>>(values_);
  if (i >= column.size() || std::isnan(column[i])) return std::nullopt;
  return static_cast<double>(column[i]);
}

std::string escape(const std::string& raw) {
  // A page with a byte that is not UTF-8 in it is not the UTF-8 it says it is.
  const std::string s = common::isUtf8(raw) ? raw : common::printable(raw);
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
         "13px}th{background:#f4f4f4}.supports{font-weight:bold;color:#b00}h2{margin-top:32px}"
         ".hover{font-size:12px;min-height:1.4em;color:#333}svg.timeline{cursor:crosshair}"
         // A class or a time is one word ("disk-/slow" wrapped on the DDP page); the evidence
         // column takes the room left, the ranks' sentence wraps within its own.
         "table.incidents td{white-space:nowrap;vertical-align:top}"
         "table.incidents td.ranks,table.incidents td.evidence{white-space:normal}"
         "table.incidents td.ranks{min-width:14em}table.incidents td.evidence{min-width:28em}" +
         extra_css + "</style>\n</head><body>\n<h1>" + escape(title) + "</h1>\n";
}

std::string pageEnd() {
  return std::string(kTimelineScript) +
         "<script>document.body.dataset.rendered = "
         "document.querySelectorAll('svg.timeline').length + ' timelines';</script>\n"
         "</body></html>\n";
}

double roundedTop(double top) {
  if (!(top > 0) || !std::isfinite(top)) return 1.0;
  const double quarter = top / 4.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(quarter)));
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= quarter * (1 - 1e-9)) return 4.0 * m * magnitude;
  }
  return 40.0 * magnitude;
}

std::string readableSignal(const model::EvidenceItem& e) {
  // The metric says what it is; the subject and remark name the device, rank or node.
  const model::EvidenceName& n = e.name;
  const std::string readable = model::readableOf(n.metric);
  if (readable.empty()) return e.signal;
  std::string of = n.subjectText();
  if (const std::string remark = n.remark(); !remark.empty())
    of += (of.empty() ? "" : " ") + remark;
  return of.empty() ? readable : of + ": " + readable;
}

std::string evidenceCell(const std::vector<model::EvidenceItem>& evidence) {
  std::string out;
  for (const auto& e : evidence) {
    if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
    out += fmt::format("<div class=\"{}\" title=\"{}\">{}: {:.3g} &rarr; {:.3g}</div>",
                       e.supports ? "supports" : "", escape(e.signal), escape(readableSignal(e)),
                       e.baseline, e.during);
  }
  return out;
}

// The standing limiter's phases: a strip along the top, one colour a limiter, labelled, with a
// legend of the limiters it shows (issue 44: a band without either said nothing).
std::string limiterStrip(const std::vector<Band>& bands, const std::function<double(double)>& xOf,
                         double plot_w) {
  std::string out;
  auto colourOf = [](const std::string& limiter) {
    return limiter == "gpu"             ? "#2ca02c"
           : limiter == "io-throttled"  ? "#9467bd"
           : limiter == "input-storage" ? "#d62728"
           : limiter == "host"          ? "#8c564b"
           : limiter == "unknown"       ? "#c7c7c7"
                                        : "#ff7f0e";  // input-cpu, input-workers
  };
  if (!bands.empty()) {
    out += fmt::format(
        "<text class=\"limiter-label\" x=\"{}\" y=\"7\" font-size=\"10\" text-anchor=\"end\">"
        "limiter</text>\n",
        kLeft - 4);
    std::vector<std::string> shown;
    for (const auto& band : bands) {
      if (std::find(shown.begin(), shown.end(), band.limiter) == shown.end())
        shown.push_back(band.limiter);
    }
    double x = kLeft + plot_w;  // right-aligned, last first
    for (auto it = shown.rbegin(); it != shown.rend(); ++it) {
      const double text_w = 6.0 * static_cast<double>(it->size());
      x -= text_w + 16;
      out += fmt::format(
          "<g class=\"limiter-legend\"><rect x=\"{:.1f}\" y=\"9\" width=\"9\" height=\"9\" "
          "fill=\"{}\"/><text x=\"{:.1f}\" y=\"17\" font-size=\"10\">{}</text></g>\n",
          x, colourOf(*it), x + 12, escape(*it));
    }
  }
  for (const auto& band : bands) {
    const double x0 = xOf(static_cast<double>(band.start_ms));
    const double x1 = std::max(x0 + 2, xOf(static_cast<double>(band.end_ms)));
    const char* colour = colourOf(band.limiter);
    out += fmt::format(
        "<rect class=\"limiter-band\" data-limiter=\"{}\" data-start=\"{}\" data-end=\"{}\" "
        "x=\"{:.1f}\" y=\"0\" width=\"{:.1f}\" height=\"6\" fill=\"{}\"><title>{}</title></rect>\n",
        escape(band.limiter), band.start_ms, band.end_ms, x0, x1 - x0, colour,
        escape(band.tooltip));
  }
  return out;
}

std::string renderTimeline(const model::JobSeries& s, const std::vector<Panel>& panels,
                           const std::vector<Shade>& shades, size_t index,
                           const std::vector<Band>& bands) {
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
  const Buckets buckets = bucketsOf(s);
  nlohmann::json data = {{"t0", t0},
                         {"t1", t1},
                         {"left", kLeft},
                         {"width", plot_w},
                         {"bottom", height - 30},
                         {"times", buckets.times},
                         {"panels", nlohmann::json::array()}};
  svg += limiterStrip(bands, xOf, plot_w);
  // Incidents first, under the lines, across every panel.
  for (const auto& shade : shades) {
    const double x0 = xOf(static_cast<double>(shade.start_ms));
    const double x1 = std::max(x0 + 2, xOf(static_cast<double>(shade.end_ms)));
    svg += fmt::format(
        "<rect class=\"incident\" data-class=\"{}\" data-start=\"{}\" data-end=\"{}\" "
        "x=\"{:.1f}\" y=\"10\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
        "fill-opacity=\"0.18\"><title>{}</title></rect>\n",
        shade.cls, shade.start_ms, shade.end_ms, x0, x1 - x0, height - 40,
        shade.cls == "disk-slow" ? "#d62728" : "#ff7f0e", escape(shade.tooltip));
    svg += fmt::format(
        // Inside the first panel's top, not over its title (they overlapped).
        "<text class=\"incident-label\" data-start=\"{}\" data-end=\"{}\" x=\"{:.1f}\" y=\"43\" "
        "font-size=\"12\">{}</text>\n",
        shade.start_ms, shade.end_ms, x0 + 3, escape(shade.label));
  }
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    const double y0 = 30 + static_cast<double>(p) * (kPanelHeight + kGap);
    // Shares have a natural top of 100 %, the rest scale to their data; a share above 100 %
    // (a wait longer than the interval it is reported in) raises the top rather than being cut.
    const bool share = panel.unit == "%" && !panel.fit;
    double y_max = share ? 100.0 : 1.0;
    for (const auto* values : {&panel.values, &panel.second}) {
      for (size_t i = 0; i < values->size(); ++i) {
        const auto v = (*values)[i];
        if (v && (!share || *v > 100.0)) y_max = std::max(y_max, *v * (share ? 1.05 : 1.1));
      }
    }
    if (!share || y_max > 100.0) y_max = roundedTop(y_max);  // 0.5, 1, 1.5, 2 ms: not 0.697
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
    const auto means = bucketMeans(buckets, panel.values);
    const std::string path_id = fmt::format("{}-{}", panel.id, job_index);
    svg += fmt::format(
        "<path id=\"{}\" class=\"series\" data-series=\"{}\" d=\"{}\" fill=\"none\" "
        "stroke=\"{}\" stroke-width=\"1.3\"/>\n",
        path_id, panel.id, pathFor(buckets, means, y0, y_max, t0, t1), panel.color);
    nlohmann::json entry = {
        {"id", path_id},     {"title", panel.title}, {"unit", panel.unit},        {"y0", y0},
        {"h", kPanelHeight}, {"ymax", y_max},        {"values", meansJson(means)}};
    if (!panel.second.empty()) {
      const auto second = bucketMeans(buckets, panel.second);
      const std::string second_id = fmt::format("{}-work-{}", panel.id, job_index);
      svg += fmt::format(
          "<path id=\"{}\" class=\"series second\" data-series=\"{}-work\" d=\"{}\" "
          "fill=\"none\" stroke=\"{}\" stroke-width=\"1.3\" stroke-dasharray=\"4 3\"/>\n",
          second_id, panel.id, pathFor(buckets, second, y0, y_max, t0, t1), panel.second_color);
      entry["second"] = meansJson(second);
      entry["second_id"] = second_id;
    }
    data["panels"].push_back(std::move(entry));
  }
  for (int k = 0; k <= 4; ++k) {
    const double t = t0 + (t1 - t0) * k / 4.0;
    const char* anchor = k == 0 ? "start" : (k == 4 ? "end" : "middle");
    svg += fmt::format(
        "<text class=\"tick\" data-k=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" "
        "text-anchor=\"{}\">{}</text>\n",
        k, xOf(t), height - 8, anchor, utcText(static_cast<int64_t>(t)).substr(11));
  }
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">UTC</text>\n",
      kLeft - 4, height - 8);
  return svg + "</svg>\n" + timelineData(data, job_index);
}

}  // namespace stallwatch::render
