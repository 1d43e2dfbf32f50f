// The timeline of the HTML reports: panels of per-interval series on one time axis, stalls
// shaded across all of them. Inline SVG, nothing fetched: the page works offline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/series.h"

namespace stallwatch::cli {

std::string escape(const std::string& text);  // for HTML text and attributes

struct Panel {
  std::string id, title, unit;
  model::Series values;
  std::string color;
  model::Series second;  // optional: drawn dashed on the same axis (a rank's GPU work)
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

// One <svg class="timeline" id="timeline-INDEX"> over S's span; each panel's path has the id
// "PANEL.ID-INDEX" (the browser test finds them by it).
std::string renderTimeline(const model::JobSeries& s, const std::vector<Panel>& panels,
                           const std::vector<Shade>& shades, size_t index);

}  // namespace stallwatch::cli
