// The HTML timeline's panels: a lane read in place from a float32 column (the fleet page's
// nodes) draws what the same values as a series draw, gaps included.
#include "render/html_timeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <span>

namespace stallwatch::render {
namespace {

model::JobSeries sixIntervals() {
  model::JobSeries s;
  for (int64_t i = 1; i <= 6; ++i) {
    s.ts_ms.push_back(1'700'000'000'000 + i * 1000);
    s.interval_s.push_back(1.0);
  }
  return s;
}

// The d attribute of the panel's path.
std::string pathOf(const std::string& svg, const std::string& id) {
  std::smatch m;
  const std::regex path("<path id=\"" + id + "\"[^>]* d=\"([^\"]*)\"");
  return std::regex_search(svg, m, path) ? m[1].str() : "(no path " + id + ")";
}

TEST(HtmlTimeline, AColumnReadInPlaceDrawsWhatTheSameSeriesDraws) {
  const float none = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> column = {10, 20, none, 40, 50, 60};
  const model::Series series = {10.0, 20.0, std::nullopt, 40.0, 50.0, 60.0};
  const model::JobSeries s = sixIntervals();
  const std::string from_column = renderTimeline(
      s,
      {{"lane", "node", "%", PanelValues(std::span<const float>(column)), "#000", {}, "", false}},
      {}, 0);
  const std::string from_series =
      renderTimeline(s, {{"lane", "node", "%", series, "#000", {}, "", false}}, {}, 0);
  EXPECT_EQ(from_column, from_series);
  // The missing interval breaks the line: two strokes, of two and three points.
  const std::string d = pathOf(from_column, "lane-0");
  EXPECT_EQ(std::count(d.begin(), d.end(), 'M'), 2) << d;
  EXPECT_EQ(std::count(d.begin(), d.end(), 'L'), 3) << d;
  EXPECT_NE(from_column.find("\"values\":[10.0,20.0,null,40.0,50.0,60.0]"), std::string::npos);
}

TEST(HtmlTimeline, PanelValuesSayNoneForNaNAndPastTheEnd) {
  const std::vector<float> column = {1.5F, std::nanf("")};
  const PanelValues v{std::span<const float>(column)};
  EXPECT_EQ(v.size(), 2U);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_FALSE(v[1].has_value());
  EXPECT_FALSE(v[2].has_value());
  const PanelValues series(model::Series{3.0});
  EXPECT_EQ(series[0], 3.0);
  EXPECT_FALSE(series[1].has_value());
  EXPECT_TRUE(PanelValues().empty());
}

}  // namespace
}  // namespace stallwatch::render
