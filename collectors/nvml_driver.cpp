// NVML loaded at run time, so that one binary runs on hosts with and without the NVIDIA
// driver. The library is opened once; every entry point is resolved up front and a missing
// one (an old driver) turns only that reading into "not supported".
#include <dlfcn.h>

#include <string>
#include <vector>

#include "collectors/gpu_driver.h"
#include "collectors/nvml_api.h"

namespace stallwatch::collectors {
namespace {

class NvmlDriver final : public GpuDriver {
 public:
  explicit NvmlDriver(std::string library) : library_(std::move(library)) {}
  ~NvmlDriver() override {
    if (initialised_ && shutdown_) shutdown_();
    if (handle_) dlclose(handle_);
  }
  NvmlDriver(const NvmlDriver&) = delete;
  NvmlDriver& operator=(const NvmlDriver&) = delete;

  DriverResult<bool> init() override {
    if (initialised_) return {DriverCode::kOk, true, {}};
    handle_ = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) {
      const char* why = dlerror();
      return {DriverCode::kNotSupported, false,
              "no NVIDIA driver: cannot load " + library_ + (why ? std::string(": ") + why : "")};
    }
    resolve(init_, "nvmlInit_v2");
    resolve(shutdown_, "nvmlShutdown");
    resolve(error_string_, "nvmlErrorString");
    resolve(get_count_, "nvmlDeviceGetCount_v2");
    resolve(get_handle_, "nvmlDeviceGetHandleByIndex_v2");
    resolve(get_name_, "nvmlDeviceGetName");
    resolve(get_uuid_, "nvmlDeviceGetUUID");
    resolve(get_rates_, "nvmlDeviceGetUtilizationRates");
    resolve(get_samples_, "nvmlDeviceGetSamples");
    resolve(get_memory_, "nvmlDeviceGetMemoryInfo");
    resolve(get_clock_, "nvmlDeviceGetClockInfo");
    resolve(get_pcie_, "nvmlDeviceGetPcieThroughput");
    resolve(get_process_util_, "nvmlDeviceGetProcessUtilization");
    resolve(get_compute_processes_, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!init_ || !get_count_ || !get_handle_) {
      return {DriverCode::kError, false, library_ + " lacks nvmlInit_v2 or device enumeration"};
    }
    if (const nvml::Return rc = init_(); rc != nvml::kSuccess) {
      return {DriverCode::kError, false, "nvmlInit_v2 failed: " + describe(rc)};
    }
    initialised_ = true;
    return {DriverCode::kOk, true, {}};
  }

  DriverResult<std::vector<GpuInfo>> devices() override {
    DriverResult<std::vector<GpuInfo>> out;
    unsigned count = 0;
    if (const nvml::Return rc = get_count_(&count); rc != nvml::kSuccess) {
      return fail<std::vector<GpuInfo>>(rc, "nvmlDeviceGetCount_v2");
    }
    handles_.assign(count, nullptr);
    for (unsigned i = 0; i < count; ++i) {
      GpuInfo info;
      info.index = i;
      if (get_handle_(i, &handles_[i]) != nvml::kSuccess) continue;
      char buffer[nvml::kDeviceUuidBufferSize] = {};
      if (get_uuid_ && get_uuid_(handles_[i], buffer, sizeof buffer) == nvml::kSuccess) {
        info.uuid = buffer;
      }
      char name[nvml::kDeviceNameBufferSize] = {};
      if (get_name_ && get_name_(handles_[i], name, sizeof name) == nvml::kSuccess) info.name = name;
      out.value.push_back(std::move(info));
    }
    out.code = DriverCode::kOk;
    return out;
  }

  DriverResult<std::vector<GpuUtilizationSample>> utilizationSamples(uint32_t index,
                                                                     uint64_t since_us) override {
    using R = std::vector<GpuUtilizationSample>;
    nvml::Device d = device(index);
    if (!d || !get_samples_) return unsupported<R>("nvmlDeviceGetSamples");
    nvml::ValueType type{};
    unsigned count = 0;
    // First call sizes the buffer, as NVML's documentation prescribes.
    nvml::Return rc =
        get_samples_(d, nvml::kGpuUtilizationSamples, since_us, &type, &count, nullptr);
    if (rc != nvml::kSuccess) return fail<R>(rc, "nvmlDeviceGetSamples");
    samples_.resize(count);
    rc = get_samples_(d, nvml::kGpuUtilizationSamples, since_us, &type, &count, samples_.data());
    if (rc != nvml::kSuccess) return fail<R>(rc, "nvmlDeviceGetSamples");
    R out;
    out.reserve(count);
    for (unsigned i = 0; i < count && i < samples_.size(); ++i) {
      out.push_back({samples_[i].timeStamp, toDouble(type, samples_[i].sampleValue)});
    }
    return {DriverCode::kOk, std::move(out), {}};
  }

  DriverResult<GpuRates> utilizationRates(uint32_t index) override {
    nvml::Device d = device(index);
    if (!d || !get_rates_) return unsupported<GpuRates>("nvmlDeviceGetUtilizationRates");
    nvml::Utilization u{};
    if (const auto rc = get_rates_(d, &u); rc != nvml::kSuccess) {
      return fail<GpuRates>(rc, "nvmlDeviceGetUtilizationRates");
    }
    return {DriverCode::kOk, {u.gpu, u.memory}, {}};
  }

  DriverResult<GpuMemory> memory(uint32_t index) override {
    nvml::Device d = device(index);
    if (!d || !get_memory_) return unsupported<GpuMemory>("nvmlDeviceGetMemoryInfo");
    nvml::Memory m{};
    if (const auto rc = get_memory_(d, &m); rc != nvml::kSuccess) {
      return fail<GpuMemory>(rc, "nvmlDeviceGetMemoryInfo");
    }
    return {DriverCode::kOk, {m.total, m.used}, {}};
  }

  DriverResult<uint32_t> smClockMhz(uint32_t index) override {
    nvml::Device d = device(index);
    if (!d || !get_clock_) return unsupported<uint32_t>("nvmlDeviceGetClockInfo");
    unsigned mhz = 0;
    if (const auto rc = get_clock_(d, nvml::kClockSm, &mhz); rc != nvml::kSuccess) {
      return fail<uint32_t>(rc, "nvmlDeviceGetClockInfo");
    }
    return {DriverCode::kOk, mhz, {}};
  }

  DriverResult<uint64_t> pcieBytesPerSecond(uint32_t index, PcieDirection direction) override {
    nvml::Device d = device(index);
    if (!d || !get_pcie_) return unsupported<uint64_t>("nvmlDeviceGetPcieThroughput");
    unsigned kib_per_second = 0;
    const auto counter = direction == PcieDirection::kTx ? nvml::kPcieTxBytes : nvml::kPcieRxBytes;
    if (const auto rc = get_pcie_(d, counter, &kib_per_second); rc != nvml::kSuccess) {
      return fail<uint64_t>(rc, "nvmlDeviceGetPcieThroughput");
    }
    return {DriverCode::kOk, uint64_t{kib_per_second} * 1024, {}};  // NVML reports KB/s
  }

  DriverResult<std::vector<GpuProcessUtilization>> processUtilization(uint32_t index,
                                                                      uint64_t since_us) override {
    using R = std::vector<GpuProcessUtilization>;
    nvml::Device d = device(index);
    if (!d || !get_process_util_) return unsupported<R>("nvmlDeviceGetProcessUtilization");
    unsigned count = 0;
    nvml::Return rc = get_process_util_(d, nullptr, &count, since_us);
    if (rc == nvml::kSuccess && count == 0) return {DriverCode::kOk, {}, {}};
    if (rc != nvml::kSuccess && rc != nvml::kErrorInsufficientSize) {
      return fail<R>(rc, "nvmlDeviceGetProcessUtilization");
    }
    process_samples_.resize(count);
    rc = get_process_util_(d, process_samples_.data(), &count, since_us);
    if (rc != nvml::kSuccess) return fail<R>(rc, "nvmlDeviceGetProcessUtilization");
    R out;
    for (unsigned i = 0; i < count && i < process_samples_.size(); ++i) {
      const auto& s = process_samples_[i];
      out.push_back({s.pid, s.timeStamp, s.smUtil, s.memUtil});
    }
    return {DriverCode::kOk, std::move(out), {}};
  }

  DriverResult<std::vector<GpuComputeProcess>> computeProcesses(uint32_t index) override {
    using R = std::vector<GpuComputeProcess>;
    nvml::Device d = device(index);
    if (!d || !get_compute_processes_) return unsupported<R>("nvmlDeviceGetComputeRunningProcesses_v3");
    // The list can grow between the sizing call and the real one: retry a few times.
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned count = static_cast<unsigned>(process_infos_.size());
      const nvml::Return rc =
          get_compute_processes_(d, &count, process_infos_.empty() ? nullptr : process_infos_.data());
      if (rc == nvml::kErrorInsufficientSize) {
        process_infos_.resize(count + 8);
        continue;
      }
      if (rc != nvml::kSuccess) return fail<R>(rc, "nvmlDeviceGetComputeRunningProcesses_v3");
      R out;
      for (unsigned i = 0; i < count && i < process_infos_.size(); ++i) {
        GpuComputeProcess p;
        p.pid = process_infos_[i].pid;
        // NVML_VALUE_NOT_AVAILABLE (all ones) where memory use cannot be read.
        if (process_infos_[i].usedGpuMemory != ~0ull) p.used_memory_bytes = process_infos_[i].usedGpuMemory;
        out.push_back(p);
      }
      return {DriverCode::kOk, std::move(out), {}};
    }
    return {DriverCode::kError, {}, "nvmlDeviceGetComputeRunningProcesses_v3: list kept growing"};
  }

 private:
  template <typename Fn>
  void resolve(Fn& fn, const char* symbol) {
    fn = reinterpret_cast<Fn>(dlsym(handle_, symbol));
  }

  nvml::Device device(uint32_t index) const {
    return index < handles_.size() ? handles_[index] : nullptr;
  }

  std::string describe(nvml::Return rc) const {
    const char* text = error_string_ ? error_string_(rc) : nullptr;
    return (text ? std::string(text) : std::string("error")) + " (" + std::to_string(rc) + ")";
  }

  template <typename T>
  DriverResult<T> fail(nvml::Return rc, const char* call) const {
    DriverResult<T> r;
    switch (rc) {
      case nvml::kErrorNotSupported: r.code = DriverCode::kNotSupported; break;
      case nvml::kErrorNotFound: r.code = DriverCode::kNoNewData; break;
      case nvml::kErrorGpuIsLost: r.code = DriverCode::kGpuLost; break;
      default: r.code = DriverCode::kError; break;
    }
    r.message = std::string(call) + ": " + describe(rc);
    return r;
  }

  template <typename T>
  static DriverResult<T> unsupported(const char* call) {
    return {DriverCode::kNotSupported, T{}, std::string(call) + " unavailable"};
  }

  static double toDouble(nvml::ValueType type, const nvml::Value& v) {
    switch (type) {
      case nvml::kValueDouble: return v.dVal;
      case nvml::kValueUnsignedInt: return v.uiVal;
      case nvml::kValueUnsignedLong: return static_cast<double>(v.ulVal);
      case nvml::kValueUnsignedLongLong: return static_cast<double>(v.ullVal);
      case nvml::kValueSignedLongLong: return static_cast<double>(v.sllVal);
      case nvml::kValueSignedInt: return v.siVal;
    }
    return -1;  // unknown type: the collector's range check drops it
  }

  std::string library_;
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::vector<nvml::Device> handles_;
  std::vector<nvml::Sample> samples_;
  std::vector<nvml::ProcessUtilizationSample> process_samples_;
  nvml::InitFn init_ = nullptr;
  nvml::ShutdownFn shutdown_ = nullptr;
  nvml::ErrorStringFn error_string_ = nullptr;
  nvml::DeviceGetCountFn get_count_ = nullptr;
  nvml::DeviceGetHandleByIndexFn get_handle_ = nullptr;
  nvml::DeviceGetNameFn get_name_ = nullptr;
  nvml::DeviceGetUuidFn get_uuid_ = nullptr;
  nvml::DeviceGetUtilizationRatesFn get_rates_ = nullptr;
  nvml::DeviceGetSamplesFn get_samples_ = nullptr;
  nvml::DeviceGetMemoryInfoFn get_memory_ = nullptr;
  nvml::DeviceGetClockInfoFn get_clock_ = nullptr;
  nvml::DeviceGetPcieThroughputFn get_pcie_ = nullptr;
  nvml::DeviceGetProcessUtilizationFn get_process_util_ = nullptr;
  nvml::DeviceGetComputeRunningProcessesFn get_compute_processes_ = nullptr;
  std::vector<nvml::ProcessInfo> process_infos_;
};

}  // namespace

std::unique_ptr<GpuDriver> makeNvmlDriver(std::string library) {
  return std::make_unique<NvmlDriver>(std::move(library));
}

}  // namespace stallwatch::collectors
