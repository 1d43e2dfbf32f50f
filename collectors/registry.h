// The table of collectors: each has a name, a one-line help, whether it runs by default, and
// a factory. The CLI builds --collector.NAME / --no-collector.NAME from this table. [NE]
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/gpu.h"
#include "collectors/jobs.h"
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
};

const std::vector<CollectorEntry>& collectorTable();

}  // namespace stallwatch::collectors
