// The table of collectors: each has a name, a one-line help, whether it runs by default, and
// a factory. The CLI builds --collector.NAME / --no-collector.NAME from this table. [NE]
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/gpu/gpu.h"
#include "collectors/jobs/jobs.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

struct CollectorConfig {
  SystemRoot root;
  GpuCollectorOptions gpu;
  JobTrackerOptions jobs;
  std::string nvml_library = "libnvidia-ml.so.1";
  NvmlOptions nvml;
};

struct CollectorEntry {
  std::string name;
  std::string help;
  bool enabled_by_default = true;
  std::function<std::unique_ptr<Collector>(const CollectorConfig&)> make;
  // The collectors whose samples of the same tick this one reads from the batch: it runs after
  // them in every tick (runOrder).
  std::vector<std::string> runs_after = {};
};

const std::vector<CollectorEntry>& collectorTable();

// TABLE in the order a tick runs it: each collector after those it runs_after, otherwise in the
// table's order. Throws std::invalid_argument for a name it does not hold or a circle.
std::vector<const CollectorEntry*> runOrder(const std::vector<CollectorEntry>& table);

}  // namespace stallwatch::collectors
