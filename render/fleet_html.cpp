// The HTML page of a run across nodes: the job's progress, then one lane per node (its least
// busy rank's GPU utilisation, GPU work dashed), the node that held the job back marked, the
// stalls shaded across all lanes; then the stalls with who held the job back and the evidence.
#include <fmt/format.h>

#include "render/fleet.h"
#include "render/html_timeline.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

std::string fleetTimeline(const FleetReport& r, size_t index) {
  const auto& a = r.analysis;
  const auto& s = a.series;
  const model::Series& progress = a.progress;
  const bool steps = a.analysis.progress_signal == model::ProgressSignal::kSteps;
  std::vector<Panel> panels = {
      {"series-progress",
       steps ? "the job's steps per second, every node together"
             : "the job's progress: " + std::string(model::toString(a.analysis.progress_signal)),
       steps ? "steps/s" : "%",
       progress,
       "#1f77b4",
       {},
       "",
       !steps}};
  for (size_t n = 0; n < s.ranks.size(); ++n) {
    bool held_back = false;
    for (const auto& fi : a.incidents) held_back = held_back || fi.straggler_node == n;
    const model::FleetReportNode& node = r.nodes[n];
    std::string ranks;
    for (int32_t k : node.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(k);
    panels.push_back(
        {fmt::format("series-node-{}", n),
         fmt::format("node {} (rank{} {}): least busy GPU's utilisation, work "
                     "dashed{}",
                     node.name, node.ranks.size() == 1 ? "" : "s", ranks.empty() ? "?" : ranks,
                     held_back ? " \u2014 held the job back" : ""),
         "%", PanelValues(a.columns[n].values[model::NodeColumns::kGpuUtil]),
         held_back ? "#d62728" : "#7f7f7f",
         PanelValues(a.columns[n].values[model::NodeColumns::kGpuWork]),
         held_back ? "#ff9896" : "#bcbd22", false});
  }
  std::vector<Shade> shades;
  for (const auto& fi : a.incidents) {
    const std::string cls = model::toString(fi.incident.cls);
    const std::string where =
        fi.straggler_node ? " on " + r.nodes[*fi.straggler_node].name : " on every node";
    std::string label = cls;
    if (!fi.incident.device.empty()) label += " " + fi.incident.device;
    label += where;
    shades.push_back({fi.incident.start_ms, fi.incident.end_ms, cls,
                      describeIncident(fi.incident) + where, label});
  }
  return renderTimeline(s, panels, shades, index);
}

}  // namespace

std::string renderFleetHtml(const std::vector<FleetReport>& reports, const FleetInputs& inputs,
                            const std::string& title) {
  std::string html = pageStart(title, ".warning{color:#b00}");
  for (const auto& p : inputs.problems) {
    html += "<p class=\"warning\">Not read: " + escape(p) + "</p>\n";
  }
  if (reports.empty()) html += "<p>No run found across the recordings.</p>\n";
  for (size_t j = 0; j < reports.size(); ++j) {
    const auto& r = reports[j];
    const auto& a = r.analysis;
    if (a.series.size() == 0) continue;
    html += fmt::format("<section class=\"run\" data-run=\"{}\"><h2>Run {} across {} nodes</h2>\n",
                        escape(r.run.key), escape(r.run.key), r.nodes.size());
    html += fmt::format("<p>{} .. {} UTC &middot; goodput <b>{}</b> &middot; {} stall(s)</p>\n",
                        utcText(a.series.ts_ms.front()), utcText(a.series.ts_ms.back()),
                        a.goodput.share ? fmt::format("{:.1f} %", *a.goodput.share * 100)
                                        : "unknown (" + escape(a.goodput.unknown_because) + ")",
                        a.incidents.size());
    if (!a.missing_ranks.empty()) {
      std::string list;
      for (int32_t k : a.missing_ranks) list += (list.empty() ? "" : ", ") + std::to_string(k);
      html += "<p class=\"warning\">No recording of ranks " + list + ".</p>\n";
    }
    for (const auto& c : a.clocks) {
      if (c.corrected) {
        html += fmt::format(
            "<p class=\"warning\">Clock of {} is {:.1f} s {} (from the job's {}); "
            "its lane is shifted by it.</p>\n",
            escape(c.node), static_cast<double>(std::llabs(c.offset_ms)) / 1000.0,
            c.offset_ms > 0 ? "ahead" : "behind", escape(a.clock_signal));
      }
    }
    html += fleetTimeline(r, j);
    html += "<h3>Stalls of the run</h3>\n";
    html +=
        "<table class=\"incidents\"><tr><th>when (UTC)</th><th>class</th><th>device</th>"
        "<th>held back by</th><th>others waited</th><th>evidence (baseline &rarr; during)</th>"
        "</tr>\n";
    for (const auto& fi : a.incidents) {
      const auto& inc = fi.incident;
      std::string who = "every node alike";
      if (fi.straggler_node) {
        who = "node " + r.nodes[*fi.straggler_node].name +
              (inc.straggler ? ", rank " + std::to_string(inc.straggler->rank) : "");
      }
      const std::string evidence = evidenceCell(inc.evidence);
      html += fmt::format(
          "<tr><td>{} .. {}</td><td>{}</td><td>{}</td><td class=\"held-back\">{}</td>"
          "<td>{:.1f} s ({:.1f} GPU-s)</td><td>{}</td></tr>\n",
          utcText(inc.start_ms), utcText(inc.end_ms).substr(11), model::toString(inc.cls),
          escape(inc.device + (inc.physical_device.empty() ? "" : " on " + inc.physical_device)),
          escape(who), fi.others_waited_s, fi.others_gpu_seconds, evidence);
    }
    html += "</table></section>\n";
  }
  html += pageEnd();
  return html;
}

}  // namespace stallwatch::render
