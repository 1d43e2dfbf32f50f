// The Prometheus text format, written: label values made safe and escaped, numbers as the
// format spells them, families with their HELP and TYPE. Internal to agent/'s metrics files.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <string_view>

#include "agent/metric_sink.h"
#include "common/text.h"

namespace stallwatch::agent::metrics_text {

// The longest label value written: ids and mount points are bounded where they enter
// (common/text.h); this bounds the page whatever a label was built from.
constexpr size_t kMaxLabelValueBytes = 1024;

// Label values: valid UTF-8 (a byte that is not makes Prometheus reject the whole page and
// mark the target down), bounded, and backslash, double quote and newline escaped, as the
// text format requires; appended to OUT.
template <typename Out>
void appendEscaped(const std::string& raw, Out& out) {
  const bool safe = raw.size() <= kMaxLabelValueBytes && common::isUtf8(raw);
  const std::string bounded = safe ? std::string() : common::boundedUtf8(raw, kMaxLabelValueBytes);
  const std::string_view value = safe ? raw : bounded;
  size_t plain = 0;  // the run of bytes since the last one escaped, appended at once
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    const char* escaped = c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : nullptr;
    if (!escaped) continue;
    out.append(value.data() + plain, value.data() + i);
    out.append(escaped, escaped + 2);
    plain = i + 1;
  }
  out.append(value.data() + plain, value.data() + value.size());
}

inline std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

// The page, appended to one buffer: plain appends and fmt's own buffer, where fmt through a
// std::string's back_inserter cost most of a page's 360 us (bench/metrics_scrape_cost.py).
class Writer final : public MetricSink {
 public:
  Writer() { out_.reserve(64 * 1024); }  // a node's page is about 20 KB: no regrowth
  // Starts a family: HELP and TYPE once, then its samples.
  void family(const char* name, const char* type, const char* help) override {
    name_ = name;
    for (std::string_view part : {"# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n"})
      put(part);
  }
  using MetricSink::sample;
  void sample(const Labels& labels, double value) override { line("", labels, nullptr, value); }
  // The family's _bucket series (cumulative, "+Inf" last), then _sum and _count.
  void histogram(const Labels& labels, const double* bounds, const uint64_t* per_bound,
                 size_t n_bounds, uint64_t count, double sum) override {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < n_bounds; ++i) {
      cumulative += per_bound[i];
      const std::string le = number(bounds[i]);
      line("_bucket", labels, le.c_str(), static_cast<double>(cumulative));
    }
    line("_bucket", labels, "+Inf", static_cast<double>(count));
    line("_sum", labels, nullptr, sum);
    line("_count", labels, nullptr, static_cast<double>(count));
  }
  std::string take() { return fmt::to_string(out_); }

 private:
  // NAME_SUFFIX{LABELS[,le="LE"]} VALUE
  void line(const char* suffix, const Labels& labels, const char* le, double value) {
    put(name_);
    put(suffix);
    if (!labels.empty() || le) {
      put("{");
      bool first = true;
      const auto label = [&](const char* name, const std::string& v) {
        if (!first) put(",");
        put(name);
        put("=\"");
        appendEscaped(v, out_);
        put("\"");
        first = false;
      };
      forEachLabel(labels, label);
      if (le) label("le", le);
      put("}");
    }
    put(" ");
    if (std::isnan(value) || std::isinf(value)) {
      put(number(value));
    } else {
      fmt::format_to(fmt::appender(out_), "{}", value);
    }
    put("\n");
  }
  void put(std::string_view s) { out_.append(s.data(), s.data() + s.size()); }
  fmt::memory_buffer out_;
  std::string name_;
};

}  // namespace stallwatch::agent::metrics_text
