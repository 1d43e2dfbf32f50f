// Cost of each NVML call the GPU collector makes, on the real driver: the median and the
// maximum of N calls per GPU, in microseconds of wall time (NVML blocks inside some calls).
// Run on a GPU host: build/bench/nvml_call_bench [CALLS=20]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "collectors/gpu_driver.h"

using namespace stallwatch::collectors;

namespace {

void measure(const std::string& name, int calls, const std::function<DriverCode()>& call) {
  std::vector<double> us;
  DriverCode last = DriverCode::kOk;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    last = call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  fmt::print("{:<40} median {:>10.1f} us   max {:>10.1f} us   last code {}\n", name,
             us[us.size() / 2], us.back(), static_cast<int>(last));
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  auto driver = makeNvmlDriver();
  auto init = driver->init();
  if (!init.ok()) {
    fmt::print("no NVML: {}\n", init.message);
    return 1;
  }
  auto devices = driver->devices();
  for (const auto& gpu : devices.value) {
    fmt::print("GPU {} {} ({}), {} calls each\n", gpu.index, gpu.name, gpu.uuid, calls);
    const uint32_t i = gpu.index;
    uint64_t since = 0;
    measure("nvmlDeviceGetSamples (GPU_UTILIZATION)", calls, [&] {
      auto r = driver->utilizationSamples(i, since);
      for (const auto& s : r.value) since = std::max(since, s.timestamp_us);
      return r.code;
    });
    measure("nvmlDeviceGetUtilizationRates", calls, [&] { return driver->utilizationRates(i).code; });
    measure("nvmlDeviceGetMemoryInfo", calls, [&] { return driver->memory(i).code; });
    measure("nvmlDeviceGetClockInfo (SM)", calls, [&] { return driver->smClockMhz(i).code; });
    measure("nvmlDeviceGetPcieThroughput (TX)", std::min(calls, 10),
            [&] { return driver->pcieBytesPerSecond(i, PcieDirection::kTx).code; });
    uint64_t process_since = 0;
    measure("nvmlDeviceGetProcessUtilization", calls, [&] {
      auto r = driver->processUtilization(i, process_since);
      for (const auto& p : r.value) process_since = std::max(process_since, p.timestamp_us);
      return r.code;
    });
  }
  return 0;
}
