// Cost of each NVML call the GPU collector makes, on the real driver: the median and the
// maximum of N calls per GPU, in microseconds of wall time (NVML blocks inside some calls),
// and the median CPU time of the calling thread (what the agent pays).
// Run on a GPU host: build/bench/nvml_call_bench [CALLS=20]
// With --floor SECONDS: the least a GPU sampler can cost, the floor bench/gpu_cost.sh compares
// the agent with: once a second, nvmlDeviceGetUtilizationRates and nvmlDeviceGetMemoryInfo
// per GPU, nothing else; prints the process's CPU per second and per GPU.
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collectors/gpu/gpu_driver.h"

using namespace stallwatch::collectors;

namespace {

double threadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void measure(const std::string& name, int calls, const std::function<DriverCode()>& call,
             int pause_ms = 0) {
  std::vector<double> us, cpu;
  DriverCode last = DriverCode::kOk;
  for (int i = 0; i < calls; ++i) {
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    const double c0 = threadCpuUs();
    const auto t0 = std::chrono::steady_clock::now();
    last = call();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(threadCpuUs() - c0);
  }
  std::sort(us.begin(), us.end());
  std::sort(cpu.begin(), cpu.end());
  fmt::print(
      "{:<40} median {:>10.1f} us   max {:>10.1f} us   cpu median {:>8.1f} us   last code {}\n",
      name, us[us.size() / 2], us.back(), cpu[cpu.size() / 2], static_cast<int>(last));
}

}  // namespace

double processCpuS() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

int floorLoop(GpuDriver& driver, const std::vector<GpuInfo>& gpus, int seconds) {
  const double cpu0 = processCpuS();
  auto next = std::chrono::steady_clock::now();
  for (int s = 0; s < seconds; ++s) {
    for (const auto& g : gpus) {
      driver.utilizationRates(g.index);
      driver.memory(g.index);
    }
    next += std::chrono::seconds(1);
    std::this_thread::sleep_until(next);
  }
  const double per_second_ms = (processCpuS() - cpu0) * 1000.0 / seconds;
  fmt::print("floor: {} GPUs, {} s: {:.3f} ms CPU per second, {:.3f} ms per GPU per sample\n",
             gpus.size(), seconds, per_second_ms,
             gpus.empty() ? 0.0 : per_second_ms / static_cast<double>(gpus.size()));
  return 0;
}

int main(int argc, char** argv) {
  const bool floor = argc > 2 && std::string(argv[1]) == "--floor";
  const int calls = !floor && argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  auto driver = makeNvmlDriver();
  auto init = driver->init();
  if (!init.ok()) {
    fmt::print("no NVML: {}\n", init.message);
    return 1;
  }
  auto devices = driver->devices();
  if (floor) return floorLoop(*driver, devices.value, std::max(1, std::atoi(argv[2])));
  for (const auto& gpu : devices.value) {
    fmt::print("GPU {} {} ({}), {} calls each\n", gpu.index, gpu.name, gpu.uuid, calls);
    const uint32_t i = gpu.index;
    uint64_t since = 0;
    measure("nvmlDeviceGetSamples (GPU_UTILIZATION)", calls, [&] {
      auto r = driver->utilizationSamples(i, since);
      for (const auto& s : r.value) since = std::max(since, s.timestamp_us);
      return r.code;
    });
    measure("nvmlDeviceGetUtilizationRates", calls,
            [&] { return driver->utilizationRates(i).code; });
    measure("nvmlDeviceGetMemoryInfo", calls, [&] { return driver->memory(i).code; });
    measure("nvmlDeviceGetClockInfo (SM)", calls, [&] { return driver->smClockMhz(i).code; });
    measure("nvmlDeviceGetPcieThroughput (TX)", std::min(calls, 10),
            [&] { return driver->pcieBytesPerSecond(i, PcieDirection::kTx).code; });
    measure("nvmlDeviceGetPowerUsage", calls, [&] { return driver->powerWatts(i).code; });
    // One GPM sample and the metrics since the previous one, as the collector takes them
    // each tick; 100 ms apart so that each pair spans real time.
    driver->activity(i);
    GpuActivity last{};
    measure(
        "GPM: nvmlGpmSampleGet + MetricsGet (4)", calls,
        [&] {
          auto r = driver->activity(i);
          if (r.ok()) last = r.value;
          return r.code;
        },
        100);
    auto show = [](const std::optional<double>& v) {
      return v ? fmt::format("{:.1f}", *v) : std::string("-");
    };
    fmt::print("  last GPM reading: SM active {} %, occupancy {} %, tensor {} %, DRAM {} %\n",
               show(last.sm_active_percent), show(last.sm_occupancy_percent),
               show(last.tensor_active_percent), show(last.dram_active_percent));
    uint64_t process_since = 0;
    measure("nvmlDeviceGetProcessUtilization", calls, [&] {
      auto r = driver->processUtilization(i, process_since);
      for (const auto& p : r.value) process_since = std::max(process_since, p.timestamp_us);
      return r.code;
    });
  }
  return 0;
}
