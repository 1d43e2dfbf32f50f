// The Prometheus text format, written: label values made safe and escaped, numbers as the
// format spells them, families with their HELP and TYPE. Internal to agent/'s metrics files.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
class Writer {
 public:
  Writer() { out_.reserve(64 * 1024); }  // a node's page is about 20 KB: no regrowth
  // Starts a family: HELP and TYPE once, then its samples.
  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    for (std::string_view part : {"# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n"})
      put(part);
  }
  using Labels = std::vector<std::pair<const char*, std::string>>;
  // Labels that follow a training_job label of the job it names, on every series that has
  // one: a Kubernetes job's namespace, pod and container. Derived from the job, so they add
  // no series; set once per page.
  void jobLabels(std::map<std::string, Labels> by_job) { job_labels_ = std::move(by_job); }
  void sample(const Labels& labels, double value) {
    put(name_);
    if (!labels.empty()) {
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
      for (const auto& [name, v] : labels) {
        label(name, v);
        if (job_labels_.empty() || std::string_view(name) != "training_job") continue;
        if (auto it = job_labels_.find(v); it != job_labels_.end()) {
          for (const auto& [extra, extra_value] : it->second) label(extra, extra_value);
        }
      }
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
  void sample(double value) { sample({}, value); }
  // A sample of the family's series SUFFIX (a histogram's _bucket, _sum, _count).
  void sample(const char* suffix, const Labels& labels, double value) {
    const std::string family = name_;
    name_ = family + suffix;
    sample(labels, value);
    name_ = family;
  }
  std::string take() { return fmt::to_string(out_); }

 private:
  void put(std::string_view s) { out_.append(s.data(), s.data() + s.size()); }
  fmt::memory_buffer out_;
  std::string name_;
  std::map<std::string, Labels> job_labels_;
};

}  // namespace stallwatch::agent::metrics_text
