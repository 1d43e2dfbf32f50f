// GPU collector: per GPU and interval, utilisation (the mean of the driver's sub-second
// samples in the interval, nvmlDeviceGetSamples; nvmlDeviceGetUtilizationRates where samples
// are not offered), memory used, SM clock, PCIe throughput, and per-process utilisation.
// A value outside its documented range (utilisation over 100 % is a known NVML/DCGM quirk)
// is dropped and counted, never stored.
#pragma once

#include <cstdint>
#include <memory>

#include "collectors/collector.h"
#include "collectors/gpu/gpu_driver.h"

namespace stallwatch::collectors {

struct GpuCollectorOptions {
  // nvmlDeviceGetPcieThroughput samples the link inside the call: 20.9 ms per direction per
  // GPU measured on an H200 (driver 580), against ~6 ms for all other reads together. Off
  // unless asked for, so that eight GPUs do not hold the sampling thread for 0.4 s a tick.
  bool pcie = false;
  bool per_process = true;
  // nvmlDeviceGetProcessUtilization costs ~2.7 ms of CPU per GPU per call (H100, H200,
  // driver 580): read once a minute at 1 s intervals, the samples since the last read at once.
  uint32_t process_every_ticks = 60;
  // Where utilisation comes from. The driver's sample buffer (nvmlDeviceGetSamples) gives the
  // mean of the interval's sub-second samples for ~2.7 ms of CPU per GPU; the utilisation rate
  // (nvmlDeviceGetUtilizationRates) the driver's last sample period for ~0.4 µs. kAuto: the
  // buffer only for GPUs without GPM, where utilisation is all the correlator has; a GPU with
  // GPM is judged by its GPM work and reads the cheap rate (docs/MEASUREMENTS.md).
  enum class Utilization { kAuto, kSamples, kRates };
  Utilization utilization = Utilization::kAuto;
  // GPM activity metrics (SM activity, occupancy, tensor, DRAM) where the GPU offers them.
  bool activity = true;
  // Only these GPUs (UUIDs or indexes, --gpu): one agent per job on a shared node.
  std::vector<std::string> only;
};

struct GpuCollectorCounters {
  uint64_t out_of_range_values = 0;  // readings dropped for being outside 0..100 %
  uint64_t lost_gpu_events = 0;
};

class GpuCollector final : public Collector {
 public:
  GpuCollector(std::unique_ptr<GpuDriver> driver, GpuCollectorOptions options);
  std::string_view name() const override { return "gpu"; }
  CollectResult collect(const Tick& tick, SampleBatch& out) override;

  const GpuCollectorCounters& counters() const { return counters_; }
  // The GPUs found at start (empty when there is no driver or no GPU).
  const std::vector<GpuInfo>& gpus() const { return gpus_; }
  // Why there are no GPU readings, when there are none.
  const std::string& unavailableReason() const { return unavailable_; }

 private:
  struct PerGpu {
    uint64_t last_sample_us = 0;
    uint64_t last_process_us = 0;
    bool lost = false;
    bool activity_unsupported = false;
    bool activity_seen = false;  // GPM answered: utilisation may come from the cheap rate
    uint32_t ticks_to_processes = 0;
  };
  std::optional<double> utilization(uint32_t index, PerGpu& state, GpuSample& sample,
                                    uint64_t& skipped);
  void readActivity(const GpuInfo& gpu, PerGpu& state, GpuSample& sample, uint64_t& skipped,
                    std::string& notice);

  std::unique_ptr<GpuDriver> driver_;
  GpuCollectorOptions options_;
  GpuCollectorCounters counters_;
  std::vector<GpuInfo> gpus_;
  std::vector<PerGpu> state_;
  bool described_ = false;
  std::string pending_notice_;  // said with the first collection (a --gpu that matched nothing)  //
                                // the GPUs went out in a batch's gpu_updates
  std::string unavailable_;
  bool samples_supported_ = true;
};

}  // namespace stallwatch::collectors
