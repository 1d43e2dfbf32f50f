#include "agent/metrics_io_latency.h"

#include <array>

#include "model/io_latency_histogram.h"

namespace stallwatch::agent {
namespace {

using Buckets = std::array<uint64_t, kIoLatencyBounds.size()>;

// A row's histogram on the page's bounds (per bound, not cumulated): a slot counts at the first
// bound at or above its top, within 1/8 of a value.
Buckets bucketsOf(const collectors::IoLatencySample& r) {
  model::IoLatencySlots slots{};
  model::addEncodedIoLatencySlots(r.slots, slots);
  Buckets at_or_below{};
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s] == 0) continue;
    const double top = model::ioLatencySlotHigh(s) / 1e6;
    for (size_t i = 0; i < kIoLatencyBounds.size(); ++i) {
      if (top <= kIoLatencyBounds[i] * (1 + 1e-9)) {
        at_or_below[i] += slots[s];
        break;
      }
    }
  }
  return at_or_below;
}

void addRow(const collectors::IoLatencySample& r, const Buckets& buckets, IoLatencyMetric& m) {
  m.count += r.count;
  m.sum_seconds += r.mean_ms / 1000 * static_cast<double>(r.count);
  for (size_t i = 0; i < buckets.size(); ++i) m.at_or_below[i] += buckets[i];
}

void renderFamily(const std::vector<IoLatencyMetric>& totals, bool jobs, MetricSink& w) {
  bool any = false;
  for (const auto& m : totals) any = any || m.training_job.empty() != jobs;
  if (!any) return;
  if (jobs) {
    w.family("stallwatch_job_io_latency_seconds", "histogram",
             "A followed job's own I/Os' latency per device and operation, since the job started "
             "(eBPF; --collector.io_latency); the series end with the job.");
  } else {
    w.family("stallwatch_io_latency_seconds", "histogram",
             "Every I/O's latency from its start (or issue) to its completion, per device and "
             "operation (eBPF; --collector.io_latency). A slot of the kernel's histogram counts "
             "at the first bound at or above its top: within 1/8 of a value.");
  }
  for (const auto& m : totals) {
    if (m.training_job.empty() == jobs) continue;
    std::vector<Label> labels = {{"device", m.device}, {"op", m.op}};
    if (jobs) labels.insert(labels.begin(), {"training_job", m.training_job});
    w.histogram(labels, kIoLatencyBounds.data(), m.at_or_below.data(), kIoLatencyBounds.size(),
                m.count, m.sum_seconds);
  }
}

}  // namespace

void addIoLatency(const std::vector<collectors::IoLatencySample>& rows, IoLatencyTotals& totals,
                  size_t max_series) {
  auto series = [&](const collectors::IoLatencySample& r,
                    const std::string& job) -> IoLatencyMetric* {
    auto it = totals.find({r.device, r.op, job});
    if (it == totals.end()) {
      if (totals.size() >= max_series) return nullptr;  // bounded
      it = totals.emplace(std::tuple{r.device, r.op, job}, IoLatencyMetric{r.device, r.op, job})
               .first;
    }
    return &it->second;
  };
  for (const auto& r : rows) {
    const Buckets buckets = bucketsOf(r);  // once, for everyone's series and the job's
    if (IoLatencyMetric* m = series(r, "")) addRow(r, buckets, *m);
    if (r.job_key.empty()) continue;
    if (IoLatencyMetric* m = series(r, r.job_key)) addRow(r, buckets, *m);
  }
}

void forgetIoLatencyOf(const std::string& job_key, IoLatencyTotals& totals) {
  std::erase_if(totals, [&](const auto& entry) { return std::get<2>(entry.first) == job_key; });
}

void renderIoLatency(const std::vector<IoLatencyMetric>& totals, MetricSink& w) {
  renderFamily(totals, false, w);
  renderFamily(totals, true, w);
}

}  // namespace stallwatch::agent
