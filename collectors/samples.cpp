#include "collectors/samples.h"

#include <algorithm>

namespace stallwatch::collectors {
namespace {

struct GpuMeans {
  std::optional<double> util;
  std::optional<double> active;
};

// The mean of each reading over the GPUs named in UUIDS.
GpuMeans meansOf(const std::vector<std::string>& uuids, const std::vector<GpuSample>& gpus) {
  double util = 0, active = 0;
  int util_n = 0, active_n = 0;
  for (const auto& uuid : uuids) {
    for (const auto& g : gpus) {
      if (g.uuid != uuid) continue;
      if (g.utilization_percent) {
        util += *g.utilization_percent;
        ++util_n;
      }
      if (const auto work = gpuWorkPercent(g)) {
        active += *work;
        ++active_n;
      }
    }
  }
  GpuMeans m;
  if (util_n) m.util = util / util_n;
  if (active_n) m.active = active / active_n;
  return m;
}

}  // namespace

std::optional<double> gpuWorkPercent(const GpuSample& g) {
  if (!g.tensor_active_percent && !g.dram_active_percent) return std::nullopt;
  return std::max(g.tensor_active_percent.value_or(0.0), g.dram_active_percent.value_or(0.0));
}

void attachJobGpuUtilization(SampleBatch& batch) {
  if (batch.gpus.empty()) return;
  for (auto& job : batch.jobs) {
    const GpuMeans m = meansOf(job.gpus, batch.gpus);
    job.gpu_util_percent = m.util;
    job.gpu_work_percent = m.active;
  }
  for (auto& rank : batch.ranks) {
    if (rank.gpu.empty()) continue;
    const GpuMeans m = meansOf({rank.gpu}, batch.gpus);
    rank.gpu_util_percent = m.util;
    rank.gpu_work_percent = m.active;
  }
}

}  // namespace stallwatch::collectors
