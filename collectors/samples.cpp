#include "collectors/samples.h"

namespace stallwatch::collectors {

void attachJobGpuUtilization(SampleBatch& batch) {
  if (batch.gpus.empty()) return;
  for (auto& job : batch.jobs) {
    double sum = 0;
    int count = 0;
    size_t start = 0;
    while (start < job.gpus.size()) {
      const size_t end = job.gpus.find(',', start);
      const std::string uuid = job.gpus.substr(start, end == std::string::npos ? std::string::npos : end - start);
      for (const auto& g : batch.gpus) {
        if (g.uuid == uuid && g.utilization_percent) {
          sum += *g.utilization_percent;
          ++count;
        }
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
    if (count) job.gpu_util_percent = sum / count;
  }
}

}  // namespace stallwatch::collectors
