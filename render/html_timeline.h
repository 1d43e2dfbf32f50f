// The timeline of the HTML reports: panels of per-interval series on one time axis, stalls
// shaded across all of them. Inline SVG, nothing fetched: the page works offline.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "model/incident.h"
#include "model/series.h"

namespace stallwatch::render {

std::string escape(const std::string& text);  // for HTML text and attributes

// The page around the reports: head with the shared style (EXTRA_CSS added) and the title as
// heading; the end marks the page rendered for tests in a real browser (it needs nothing
// from outside).
std::string pageStart(const std::string& title, const std::string& extra_css = "");
std::string pageEnd();
// An incident's evidence as one table cell's lines, "signal: baseline -> during", those that
// crossed their threshold marked; all-zero rows that decided nothing left out.
// (Each line readable, "loop1: await (ms)", the signal's own name as its tooltip.)
std::string evidenceCell(const std::vector<model::EvidenceItem>& evidence);
// "await_ms loop1" -> "loop1: await (ms)"; a name it does not know, as it is.
std::string readableSignal(const model::EvidenceItem& evidence);
// The top of a panel's scale whose quarters are round numbers (1, 2, 2.5, 5 times a power of
// ten): 2.79 ms -> 4 (1, 2, 3, 4), not quarters of 2.79 (issue 44).
double roundedTop(double top);

// A panel's values an interval at a time: a series of its own, or a float32 column that the
// caller keeps (NaN: none). The fleet page draws a lane per node from the correlator's columns
// without copying each lane whole (16 bytes an interval a lane, 2.6 MiB a node-day).
class PanelValues {
 public:
  PanelValues() = default;
  PanelValues(model::Series series) : values_(std::move(series)) {}  // NOLINT: implicit
  explicit PanelValues(std::span<const float> column) : values_(column) {}

  size_t size() const;
  bool empty() const { return size() == 0; }
  std::optional<double> operator[](size_t i) const;  // none past the end

 private:
  std::variant<model::Series, std::span<const float>> values_;
};

struct Panel {
  std::string id, title, unit;
  PanelValues values;
  std::string color;
  PanelValues second;  // optional: drawn dashed on the same axis (a rank's GPU work)
  std::string second_color;
  bool fit = false;  // scale to the data, not 0..100 % (GPU work sits at a few percent)
};

// A span shaded across every panel: a stall.
struct Shade {
  int64_t start_ms = 0, end_ms = 0;
  std::string cls;      // its class: disk-slow is red, the rest orange
  std::string tooltip;  // the whole claim
  std::string label;    // written at its top
};

// A span of the job's standing limiter (a phase): a strip along the top of the timeline.
struct Band {
  int64_t start_ms = 0, end_ms = 0;
  std::string limiter;  // gpu, input-cpu, ...: its colour
  std::string tooltip;  // the verdict in words
};

// One <svg class="timeline" id="timeline-INDEX"> over S's span; each panel's path has the id
// "PANEL.ID-INDEX" (the browser test finds them by it). BANDS: the limiter's phases, drawn as
// <rect class="limiter-band" data-limiter="..."> above the panels.
std::string renderTimeline(const model::JobSeries& s, const std::vector<Panel>& panels,
                           const std::vector<Shade>& shades, size_t index,
                           const std::vector<Band>& bands = {});

}  // namespace stallwatch::render
