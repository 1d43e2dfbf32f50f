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
// text format requires.
inline std::string escape(const std::string& raw) {
  const bool safe = raw.size() <= kMaxLabelValueBytes && common::isUtf8(raw);
  const std::string bounded = safe ? std::string() : common::boundedUtf8(raw, kMaxLabelValueBytes);
  const std::string& value = safe ? raw : bounded;
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

inline std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

class Writer {
 public:
  // Starts a family: HELP and TYPE once, then its samples.
  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }
  using Labels = std::vector<std::pair<const char*, std::string>>;
  // Labels that follow a training_job label of the job it names, on every series that has
  // one: a Kubernetes job's namespace, pod and container. Derived from the job, so they add
  // no series; set once per page.
  void jobLabels(std::map<std::string, Labels> by_job) { job_labels_ = std::move(by_job); }
  void sample(const Labels& labels, double value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      bool first = true;
      const auto label = [&](const char* name, const std::string& v) {
        fmt::format_to(std::back_inserter(out_), "{}{}=\"{}\"", first ? "" : ",", name, escape(v));
        first = false;
      };
      for (const auto& [name, v] : labels) {
        label(name, v);
        if (job_labels_.empty() || std::string_view(name) != "training_job") continue;
        if (auto it = job_labels_.find(v); it != job_labels_.end()) {
          for (const auto& [extra, extra_value] : it->second) label(extra, extra_value);
        }
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += number(value);
    out_ += '\n';
  }
  void sample(double value) { sample({}, value); }
  // A sample of the family's series SUFFIX (a histogram's _bucket, _sum, _count).
  void sample(const char* suffix, const Labels& labels, double value) {
    const std::string family = name_;
    name_ = family + suffix;
    sample(labels, value);
    name_ = family;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
  std::map<std::string, Labels> job_labels_;
};

}  // namespace stallwatch::agent::metrics_text
