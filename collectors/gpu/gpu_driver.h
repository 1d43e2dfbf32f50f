// The narrow interface between the GPU collector and the driver: the real one is NVML loaded
// with dlopen (nvml_driver.cpp), tests use a fake. Values come back raw, as the driver gives
// them; range checks are the collector's job.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectors/samples.h"

namespace stallwatch::collectors {

enum class DriverCode {
  kOk,
  kNotSupported,  // this GPU or driver does not offer the reading
  kNoNewData,     // no samples since the timestamp asked for
  kGpuLost,       // the GPU fell off the bus
  kError,
};

template <typename T>
struct DriverResult {
  DriverCode code = DriverCode::kError;
  T value{};
  std::string message;
  bool ok() const { return code == DriverCode::kOk; }
};

struct GpuUtilizationSample {
  uint64_t timestamp_us = 0;
  double percent = 0;  // as the driver reported it, possibly out of range
};

struct GpuMemory {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
};

struct GpuRates {
  uint32_t gpu_percent = 0;
  uint32_t memory_percent = 0;
};

struct GpuProcessUtilization {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;
  uint32_t sm_percent = 0;
  uint32_t memory_percent = 0;
};

struct GpuComputeProcess {
  uint32_t pid = 0;
  std::optional<uint64_t> used_memory_bytes;  // none where the driver cannot tell (MIG, containers)
};

// GPU Performance Monitoring metrics over the span between two samples of the device's
// counters (Hopper and later): what the SMs really did, where utilisation only says "a kernel
// ran". A GPU waiting inside a collective runs a spinning kernel: utilisation near 100 %,
// SM activity near the few SMs that kernel occupies.
struct GpuActivity {
  std::optional<double> sm_active_percent;      // NVML_GPM_METRIC_SM_UTIL
  std::optional<double> sm_occupancy_percent;   // NVML_GPM_METRIC_SM_OCCUPANCY
  std::optional<double> tensor_active_percent;  // NVML_GPM_METRIC_ANY_TENSOR_UTIL
  std::optional<double> dram_active_percent;    // NVML_GPM_METRIC_DRAM_BW_UTIL
};

enum class PcieDirection { kTx, kRx };

// The GPUs of ALL that SELECTION names, each by UUID or by the driver's index (as nvidia-smi
// numbers them); all of them when SELECTION is empty. A name that matches no GPU is put in
// UNMATCHED (when given), so that the caller can say so.
std::vector<GpuInfo> selectGpus(const std::vector<GpuInfo>& all,
                                const std::vector<std::string>& selection,
                                std::vector<std::string>* unmatched = nullptr);

class GpuDriver {
 public:
  virtual ~GpuDriver() = default;
  // Loads and initialises the driver. kNotSupported means no driver on this host.
  virtual DriverResult<bool> init() = 0;
  virtual DriverResult<std::vector<GpuInfo>> devices() = 0;
  // Utilisation samples newer than SINCE_US (0: whatever the driver buffers).
  virtual DriverResult<std::vector<GpuUtilizationSample>> utilizationSamples(uint32_t index,
                                                                             uint64_t since_us) = 0;
  virtual DriverResult<GpuRates> utilizationRates(uint32_t index) = 0;
  virtual DriverResult<GpuMemory> memory(uint32_t index) = 0;
  virtual DriverResult<uint32_t> smClockMhz(uint32_t index) = 0;
  virtual DriverResult<double> powerWatts(uint32_t index) = 0;
  // GPM metrics since the previous call for this GPU. The first call only takes the first
  // sample (kNoNewData); kNotSupported where the GPU or driver has no GPM.
  virtual DriverResult<GpuActivity> activity(uint32_t index) = 0;
  virtual DriverResult<uint64_t> pcieBytesPerSecond(uint32_t index, PcieDirection direction) = 0;
  virtual DriverResult<std::vector<GpuProcessUtilization>> processUtilization(
      uint32_t index, uint64_t since_us) = 0;
  // Processes holding a compute context on the GPU now: how jobs are found without --pid.
  virtual DriverResult<std::vector<GpuComputeProcess>> computeProcesses(uint32_t index) = 0;
};

struct NvmlOptions {
  // Give back the pages of NVML's tables that its init left holding only zeros (13.5 MB of
  // anonymous RSS, most of the agent's: collectors/gpu/library_pages.h).
  bool release_zero_pages = true;
};

// NVML through dlopen("libnvidia-ml.so.1"); PATH overrides the library name (tests, odd installs).
std::unique_ptr<GpuDriver> makeNvmlDriver(std::string library = "libnvidia-ml.so.1",
                                          NvmlOptions options = {});

}  // namespace stallwatch::collectors
