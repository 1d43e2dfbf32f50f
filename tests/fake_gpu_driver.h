// A GpuDriver whose answers the test scripts: what NVML would say, including its quirks.
#pragma once

#include <map>

#include "collectors/gpu/gpu_driver.h"

namespace stallwatch::testing {

class FakeGpuDriver final : public collectors::GpuDriver {
 public:
  struct Gpu {
    collectors::GpuInfo info;
    std::vector<collectors::GpuUtilizationSample> samples;  // all ever produced
    collectors::DriverCode samples_code = collectors::DriverCode::kOk;
    collectors::GpuRates rates{};
    collectors::GpuMemory memory{80ull << 30, 1ull << 30};
    collectors::DriverCode memory_code = collectors::DriverCode::kOk;
    uint32_t sm_clock_mhz = 1980;
    std::vector<collectors::GpuProcessUtilization> processes;
    std::vector<collectors::GpuComputeProcess> compute_processes;
    collectors::DriverCode activity_code = collectors::DriverCode::kNotSupported;
    collectors::GpuActivity activity;
    std::optional<double> power_watts;
  };

  collectors::DriverCode init_code = collectors::DriverCode::kOk;
  std::vector<Gpu> gpus;
  int pcie_calls = 0;
  int activity_calls = 0;
  int samples_calls = 0;
  int process_calls = 0;

  collectors::DriverResult<bool> init() override {
    return {init_code, init_code == collectors::DriverCode::kOk, "fake: no driver"};
  }
  collectors::DriverResult<std::vector<collectors::GpuInfo>> devices() override {
    std::vector<collectors::GpuInfo> out;
    for (const auto& g : gpus) out.push_back(g.info);
    return {collectors::DriverCode::kOk, out, {}};
  }
  collectors::DriverResult<std::vector<collectors::GpuUtilizationSample>> utilizationSamples(
      uint32_t index, uint64_t since_us) override {
    ++samples_calls;
    const Gpu& g = gpus.at(index);
    if (g.samples_code != collectors::DriverCode::kOk) return {g.samples_code, {}, "fake"};
    std::vector<collectors::GpuUtilizationSample> out;
    for (const auto& s : g.samples) {
      if (s.timestamp_us > since_us) out.push_back(s);
    }
    // NVML answers NOT_FOUND when nothing is newer than the timestamp.
    if (out.empty()) return {collectors::DriverCode::kNoNewData, {}, "fake: no new samples"};
    return {collectors::DriverCode::kOk, out, {}};
  }
  collectors::DriverResult<collectors::GpuRates> utilizationRates(uint32_t index) override {
    return {collectors::DriverCode::kOk, gpus.at(index).rates, {}};
  }
  collectors::DriverResult<collectors::GpuMemory> memory(uint32_t index) override {
    const Gpu& g = gpus.at(index);
    return {g.memory_code, g.memory,
            g.memory_code == collectors::DriverCode::kOk ? "" : "fake: lost"};
  }
  collectors::DriverResult<uint32_t> smClockMhz(uint32_t index) override {
    return {collectors::DriverCode::kOk, gpus.at(index).sm_clock_mhz, {}};
  }
  collectors::DriverResult<double> powerWatts(uint32_t index) override {
    const Gpu& g = gpus.at(index);
    if (!g.power_watts) return {collectors::DriverCode::kNotSupported, 0, "fake: no power reading"};
    return {collectors::DriverCode::kOk, *g.power_watts, {}};
  }
  collectors::DriverResult<collectors::GpuActivity> activity(uint32_t index) override {
    ++activity_calls;
    const Gpu& g = gpus.at(index);
    return {g.activity_code, g.activity,
            g.activity_code == collectors::DriverCode::kOk ? "" : "fake: no GPM"};
  }
  collectors::DriverResult<uint64_t> pcieBytesPerSecond(uint32_t,
                                                        collectors::PcieDirection d) override {
    ++pcie_calls;
    return {collectors::DriverCode::kOk, d == collectors::PcieDirection::kTx ? 1000u : 2000u, {}};
  }
  collectors::DriverResult<std::vector<collectors::GpuProcessUtilization>> processUtilization(
      uint32_t index, uint64_t since_us) override {
    ++process_calls;
    std::vector<collectors::GpuProcessUtilization> out;
    for (const auto& p : gpus.at(index).processes) {
      if (p.timestamp_us > since_us) out.push_back(p);
    }
    return {collectors::DriverCode::kOk, out, {}};
  }
  collectors::DriverResult<std::vector<collectors::GpuComputeProcess>> computeProcesses(
      uint32_t index) override {
    return {collectors::DriverCode::kOk, gpus.at(index).compute_processes, {}};
  }
};

}  // namespace stallwatch::testing
