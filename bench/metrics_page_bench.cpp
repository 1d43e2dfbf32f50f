// Cost of rendering the /metrics page of a busy GPU node: eleven block devices, eight GPUs, two
// jobs (one a Kubernetes pod), every I/O's latency of four devices, the agent's own figures.
// Run: build/bench/metrics_page_bench  (CPU time a page; the page's bytes as a counter)
#include <benchmark/benchmark.h>

#include <string>

#include "agent/metrics.h"

namespace {

using namespace stallwatch;
using agent::MetricsSnapshot;

MetricsSnapshot busyNode() {
  MetricsSnapshot s;
  s.version = "0.2.0";
  s.node = "gpu-node-017";
  s.last_sample_ms = 1'795'318'653'717;
  s.interval_seconds = 1;
  s.intervals = 86'400;
  const char* disks[] = {"nvme0n1", "nvme0n1p1", "nvme0n1p2", "nvme1n1", "nvme2n1", "nvme3n1",
                         "md0",     "sda",       "sda1",      "loop0",   "dm-0"};
  uint32_t minor = 0;
  for (const char* name : disks) {
    collectors::DiskSample d;
    d.device = name;
    d.major = 259;
    d.minor = minor++;
    d.rates = {1834.0, 212.0, 240'123'904.0, 13'893'632.0, 0.412, 1.73,
               {},     {},    3.0,           0.05,         0.83,  61.2};
    d.in_flight = 3;
    d.totals = collectors::DiskTotals{912'344,       118'293'874'688, 402'113,   90'122,
                                      7'422'812'160, 88'201,          1'202'331, 4'001'992};
    s.disks.push_back(d);
  }
  for (const char* r : {"io", "cpu", "memory"})
    s.pressure.push_back({r, 0.0213, 0.0104, 1'293'847, 644'192});
  for (uint32_t g = 0; g < 8; ++g) {
    collectors::GpuSample gpu;
    gpu.gpu_index = g;
    gpu.uuid = "GPU-3b1f6a52-9d1e-4c71-a1f0-5e2b7c9d0" + std::to_string(100 + g);
    gpu.utilization_percent = 97.5;
    gpu.memory_utilization_percent = 41.25;
    gpu.memory_used_bytes = 71'303'168'000;
    gpu.memory_total_bytes = 85'899'345'920;
    gpu.sm_clock_mhz = 1980;
    gpu.power_watts = 612.437;
    gpu.sm_active_percent = 88.1;
    gpu.sm_occupancy_percent = 43.7;
    gpu.tensor_active_percent = 51.9;
    gpu.dram_active_percent = 38.3;
    s.gpus.push_back(gpu);
  }
  for (int j = 0; j < 2; ++j) {
    collectors::JobSample job;
    job.key = j == 0 ? "torchelastic:7f3a9c1e-llm-pretrain" : "cgroup:/kubepods/burstable/pod1";
    if (j == 1) job.pod = collectors::PodName{"ml-team", "resnet-train-5c9d7", "trainer"};
    job.processes = 17;
    job.workers = 16;
    job.read_bytes_per_second = 812'334'592;
    job.rchar_per_second = 1'012'334'592;
    job.main_cpu_ratio = 0.97;
    job.workers_cpu_ratio = 11.2;
    s.jobs.push_back(job);
  }
  for (const char* c : {"diskstats", "mounts", "pressure", "cpu", "gpu", "jobs", "io_latency"})
    s.collectors.push_back({c, 86'399, 1, 0, 0, std::chrono::microseconds(1'912'000),
                            std::chrono::microseconds(53), true});
  for (const char* dev : {"nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"}) {
    for (const char* op : {"read", "write"}) {
      agent::IoLatencyMetric m{dev, op, "", 12'883'012, 1'931.4, {}};
      for (size_t b = 0; b < m.at_or_below.size(); ++b) m.at_or_below[b] = 1000 * (b + 1);
      s.io_latency.push_back(m);
    }
  }
  s.health = {{"nvme0n1", "ok"}, {"nvme1n1", "ok"}, {"sda", "warning"}};
  return s;
}

// Each page rendered anew, as a replay or an OTLP export does.
void BM_RenderOnce(benchmark::State& state) {
  const MetricsSnapshot s = busyNode();
  size_t bytes = 0;
  for (auto _ : state) bytes = agent::renderMetrics(s).size();
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderOnce);

// One renderer a scrape after another, as the endpoint renders.
void BM_RenderScrapes(benchmark::State& state) {
  const MetricsSnapshot s = busyNode();
  agent::MetricsPageRenderer renderer;
  size_t bytes = 0;
  for (auto _ : state) bytes = renderer.render(s, std::nullopt).size();
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderScrapes);

}  // namespace

BENCHMARK_MAIN();
