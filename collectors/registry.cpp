#include "collectors/registry.h"

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "collectors/devices/diskstats.h"
#include "collectors/devices/mount_targets.h"
#include "collectors/host/cpu_stat.h"
#include "collectors/host/pressure.h"
#include "collectors/io_latency/io_latency.h"

namespace stallwatch::collectors {

const std::vector<CollectorEntry>& collectorTable() {
  static const std::vector<CollectorEntry> table = {
      {"diskstats", "block device I/O rates, latency (await), queue size and utilisation", true,
       [](const CollectorConfig& c) { return makeDiskstatsCollector(c.root); }},
      {"mounts",
       "NFS and FUSE mounts as storage targets: NFS latency per op, retransmissions and "
       "timeouts (mountstats), FUSE requests waiting for the daemon (fusectl)",
       true, [](const CollectorConfig& c) { return makeMountTargetsCollector(c.root); }},
      {"pressure", "I/O, CPU and memory pressure stall shares (PSI)", true,
       [](const CollectorConfig& c) { return makePressureCollector(c.root); }},
      {"cpu", "the host's busy and I/O-wait cores, and how many are online (/proc/stat)", true,
       [](const CollectorConfig& c) { return makeCpuStatCollector(c.root); }},
      {"gpu", "NVIDIA GPU utilisation, memory, clocks, PCIe and per-process use (NVML)", true,
       [](const CollectorConfig& c) -> std::unique_ptr<Collector> {
         return std::make_unique<GpuCollector>(makeNvmlDriver(c.nvml_library, c.nvml), c.gpu);
       }},
      {"jobs",
       "training jobs (GPU processes, dataloader senders, --pid, --cgroup): their processes, "
       "I/O, CPU, D-state threads, devices read, and dataloader throughput",
       true,
       [](const CollectorConfig& c) -> std::unique_ptr<Collector> {
         auto gpu = c.jobs.follow_gpu_processes ? makeNvmlDriver(c.nvml_library, c.nvml) : nullptr;
         return std::make_unique<JobTracker>(c.root, c.jobs, std::move(gpu));
       }},
      // It tells the jobs' I/O from others' by the cgroups the jobs collector found this tick.
      {"io_latency",
       "every I/O's latency per device, operation and job through eBPF (block tracepoints): "
       "percentiles and histograms, not interval averages; needs root or CAP_BPF+CAP_PERFMON "
       "and BTF (without them it says why once)",
       true,
       [](const CollectorConfig& c) { return makeIoLatencyCollector(c.root); },
       {"jobs"}},
  };
  return table;
}

std::vector<const CollectorEntry*> runOrder(const std::vector<CollectorEntry>& table) {
  std::vector<const CollectorEntry*> order;
  std::set<std::string> placed, placing;
  // Depth first, in the table's order: a collector is placed once all it runs after are.
  std::function<void(const CollectorEntry&)> place = [&](const CollectorEntry& e) {
    if (placed.count(e.name)) return;
    if (!placing.insert(e.name).second)
      throw std::invalid_argument("collector " + e.name + " runs after itself, through others");
    for (const auto& before : e.runs_after) {
      const auto it = std::find_if(table.begin(), table.end(),
                                   [&](const CollectorEntry& x) { return x.name == before; });
      if (it == table.end())
        throw std::invalid_argument("collector " + e.name + " runs after " + before +
                                    ", which is no collector");
      place(*it);
    }
    placing.erase(e.name);
    placed.insert(e.name);
    order.push_back(&e);
  };
  for (const auto& e : table) place(e);
  return order;
}

}  // namespace stallwatch::collectors
