#include "collectors/registry.h"

#include "collectors/diskstats.h"
#include "collectors/pressure.h"

namespace stallwatch::collectors {

const std::vector<CollectorEntry>& collectorTable() {
  static const std::vector<CollectorEntry> table = {
      {"diskstats", "block device I/O rates, latency (await), queue size and utilisation",
       true, [](const CollectorConfig& c) { return makeDiskstatsCollector(c.root); }},
      {"pressure", "I/O, CPU and memory pressure stall shares (PSI)", true,
       [](const CollectorConfig& c) { return makePressureCollector(c.root); }},
      {"gpu", "NVIDIA GPU utilisation, memory, clocks, PCIe and per-process use (NVML)", true,
       [](const CollectorConfig& c) -> std::unique_ptr<Collector> {
         return std::make_unique<GpuCollector>(makeNvmlDriver(c.nvml_library), c.gpu);
       }},
  };
  return table;
}

}  // namespace stallwatch::collectors
