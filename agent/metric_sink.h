// Where the agent's metrics go as they are written, family by family: the Prometheus text page
// (metrics_writer.h) or an OTLP export (metrics_otlp.h). The families are written once
// (metrics.cpp, metrics_jobs.cpp, metrics_io_latency.cpp); each sink encodes them its own way,
// from typed values (a histogram's bounds are numbers, not label text).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stallwatch::agent {

// One label of a sample: a name, and a value that outlives the call it is passed to. Views both:
// a literal's length is known where it is written, no strlen a label.
struct Label {
  std::string_view name;
  std::string_view value;
};

class MetricSink {
 public:
  // The labels a job's series gain (a pod's namespace, pod, container), kept for a page.
  using OwnedLabels = std::vector<std::pair<const char*, std::string>>;

  virtual ~MetricSink() = default;
  // Starts a family: TYPE is "gauge", "counter" or "histogram"; its samples follow. NAME, TYPE
  // and HELP are string literals: a sink may keep them, and key what it keeps by their address.
  virtual void family(const char* name, const char* type, const char* help) = 0;
  // Labels are views, not copies: a page has hundreds of samples, and a vector of strings built
  // for each was a tenth of a page's instructions in allocations (issue 47). A braced list's
  // temporaries (std::to_string(rank)) live until the call returns; a list kept in a variable
  // must hold views of strings that outlive it.
  virtual void sample(std::span<const Label> labels, double value) = 0;
  void sample(std::initializer_list<Label> labels, double value) {
    sample(std::span<const Label>(labels.begin(), labels.size()), value);
  }
  void sample(double value) { sample(std::span<const Label>(), value); }
  // One series of a histogram family: each bound's own count (not cumulated), the count of all
  // (those above the last bound too) and their sum.
  virtual void histogram(std::span<const Label> labels, const double* bounds,
                         const uint64_t* per_bound, size_t n_bounds, uint64_t count,
                         double sum) = 0;

  // Labels that follow a training_job label of the job it names, on every series that has one:
  // a Kubernetes job's namespace, pod and container. Derived from the job, so they add no
  // series; set once per page.
  void jobLabels(std::map<std::string, OwnedLabels, std::less<>> by_job) {
    job_labels_ = std::move(by_job);
  }

 protected:
  // FN(name, value) for each of LABELS, and after a training_job the labels that follow it.
  template <typename Fn>
  void forEachLabel(std::span<const Label> labels, Fn fn) const {
    for (const auto& [name, value] : labels) {
      fn(name, value);
      if (job_labels_.empty() || name != "training_job") continue;
      if (auto it = job_labels_.find(value); it != job_labels_.end()) {
        for (const auto& [extra, extra_value] : it->second)
          fn(extra, std::string_view(extra_value));
      }
    }
  }

 private:
  std::map<std::string, OwnedLabels, std::less<>> job_labels_;
};

}  // namespace stallwatch::agent
