// NVML loaded at run time, so that one binary runs on hosts with and without the NVIDIA
// driver. The library is opened once; every entry point is resolved up front and a missing
// one (an old driver) turns only that reading into "not supported".
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectors/gpu/gpu_driver.h"
#include "collectors/gpu/library_pages.h"
#include "collectors/gpu/nvml_api.h"

namespace stallwatch::collectors {
namespace {

// The agent's own threads (its sampling, writer and health threads, never a monitored
// process): the threads NVML starts show up here.
constexpr const char* kOwnThreads = "/proc/self/task";

// NvmlDrivers of this process that hold NVML initialised: NVML counts its inits, and only the
// first one starts it (and its threads) and writes its tables.
std::atomic<int> g_holding{0};
constexpr int kReleaseAttempts = 5;
constexpr std::chrono::milliseconds kSettle{10};

class NvmlDriver final : public GpuDriver {
 public:
  NvmlDriver(std::string library, NvmlOptions options)
      : library_(std::move(library)), options_(options) {}
  ~NvmlDriver() override {
    for (auto& g : gpm_) {
      for (nvml::GpmSample sample : {g.previous, g.current}) {
        if (sample && gpm_free_) gpm_free_(sample);
      }
    }
    if (initialised_ && shutdown_) {
      shutdown_();
      g_holding.fetch_sub(1);
    }
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
    resolve(get_power_, "nvmlDeviceGetPowerUsage");
    resolve(gpm_query_, "nvmlGpmQueryDeviceSupport");
    resolve(gpm_alloc_, "nvmlGpmSampleAlloc");
    resolve(gpm_free_, "nvmlGpmSampleFree");
    resolve(gpm_get_, "nvmlGpmSampleGet");
    resolve(gpm_metrics_, "nvmlGpmMetricsGet");
    if (!init_ || !get_count_ || !get_handle_) {
      return {DriverCode::kError, false, library_ + " lacks nvmlInit_v2 or device enumeration"};
    }
    const auto threads_before = ThreadsAtRest::list(kOwnThreads);
    if (const nvml::Return rc = init_(); rc != nvml::kSuccess) {
      return {DriverCode::kError, false, "nvmlInit_v2 failed: " + describe(rc)};
    }
    initialised_ = true;
    // Only the init that started NVML wrote its tables, and only then are all of NVML's
    // threads new ones, which the release can check.
    if (g_holding.fetch_add(1) == 0 && options_.release_zero_pages) {
      if (const auto failed = releaseZeroTables(threads_before); !failed.empty()) {
        return {DriverCode::kError, false, failed};
      }
    }
    return {DriverCode::kOk, true, {}};
  }

  DriverResult<std::vector<GpuInfo>> devices() override {
    DriverResult<std::vector<GpuInfo>> out;
    unsigned count = 0;
    if (const nvml::Return rc = get_count_(&count); rc != nvml::kSuccess) {
      return fail<std::vector<GpuInfo>>(rc, "nvmlDeviceGetCount_v2");
    }
    handles_.assign(count, nullptr);
    gpm_.assign(count, {});
    for (unsigned i = 0; i < count; ++i) {
      GpuInfo info;
      info.index = i;
      if (get_handle_(i, &handles_[i]) != nvml::kSuccess) continue;
      char buffer[nvml::kDeviceUuidBufferSize] = {};
      if (get_uuid_ && get_uuid_(handles_[i], buffer, sizeof buffer) == nvml::kSuccess) {
        info.uuid = buffer;
      }
      char name[nvml::kDeviceNameBufferSize] = {};
      if (get_name_ && get_name_(handles_[i], name, sizeof name) == nvml::kSuccess)
        info.name = name;
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

  DriverResult<double> powerWatts(uint32_t index) override {
    nvml::Device d = device(index);
    if (!d || !get_power_) return unsupported<double>("nvmlDeviceGetPowerUsage");
    unsigned milliwatts = 0;
    if (const auto rc = get_power_(d, &milliwatts); rc != nvml::kSuccess) {
      return fail<double>(rc, "nvmlDeviceGetPowerUsage");
    }
    return {DriverCode::kOk, milliwatts / 1000.0, {}};
  }

  DriverResult<GpuActivity> activity(uint32_t index) override {
    nvml::Device d = device(index);
    if (!d || !gpm_query_ || !gpm_alloc_ || !gpm_free_ || !gpm_get_ || !gpm_metrics_) {
      return unsupported<GpuActivity>("nvmlGpmMetricsGet");
    }
    Gpm& g = gpm_[index];
    if (!g.checked) {
      g.checked = true;
      nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
      if (const auto rc = gpm_query_(d, &support); rc != nvml::kSuccess) {
        g.unsupported = fail<GpuActivity>(rc, "nvmlGpmQueryDeviceSupport").message;
      } else if (!support.isSupportedDevice) {
        g.unsupported = "nvmlGpmQueryDeviceSupport: this GPU has no GPM (Hopper or later needed)";
      } else if (gpm_alloc_(&g.previous) != nvml::kSuccess ||
                 gpm_alloc_(&g.current) != nvml::kSuccess) {
        g.unsupported = "nvmlGpmSampleAlloc failed";
      }
    }
    if (!g.unsupported.empty()) return {DriverCode::kNotSupported, {}, g.unsupported};
    if (const auto rc = gpm_get_(d, g.current); rc != nvml::kSuccess) {
      g.have_previous = false;
      return fail<GpuActivity>(rc, "nvmlGpmSampleGet");
    }
    const bool first = !g.have_previous;
    std::swap(g.previous, g.current);  // this sample is the next call's starting point
    g.have_previous = true;
    if (first) return {DriverCode::kNoNewData, {}, "first GPM sample"};
    nvml::GpmMetricsGet get{};
    get.version = nvml::kGpmMetricsGetVersion;
    get.sample1 = g.current;  // the older one, after the swap
    get.sample2 = g.previous;
    const nvml::GpmMetricId ids[] = {nvml::kGpmSmUtil, nvml::kGpmSmOccupancy,
                                     nvml::kGpmAnyTensorUtil, nvml::kGpmDramBwUtil};
    get.numMetrics = sizeof ids / sizeof ids[0];
    for (unsigned i = 0; i < get.numMetrics; ++i) get.metrics[i].metricId = ids[i];
    if (const auto rc = gpm_metrics_(&get); rc != nvml::kSuccess)
      return fail<GpuActivity>(rc, "nvmlGpmMetricsGet");
    auto value = [&](unsigned i) {
      return get.metrics[i].nvmlReturn == nvml::kSuccess
                 ? std::optional<double>(get.metrics[i].value)
                 : std::nullopt;
    };
    return {DriverCode::kOk, {value(0), value(1), value(2), value(3)}, {}};
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
    if (!d || !get_compute_processes_)
      return unsupported<R>("nvmlDeviceGetComputeRunningProcesses_v3");
    // The list can grow between the sizing call and the real one: retry a few times.
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned count = static_cast<unsigned>(process_infos_.size());
      const nvml::Return rc = get_compute_processes_(
          d, &count, process_infos_.empty() ? nullptr : process_infos_.data());
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
        if (process_infos_[i].usedGpuMemory != ~0ull)
          p.used_memory_bytes = process_infos_[i].usedGpuMemory;
        out.push_back(p);
      }
      return {DriverCode::kOk, std::move(out), {}};
    }
    return {DriverCode::kError, {}, "nvmlDeviceGetComputeRunningProcesses_v3: list kept growing"};
  }

 private:
  // Gives back the pages of NVML's .bss that its init left holding only zeros (13.5 MB of
  // anonymous RSS with driver 580): library_pages.h says why that is safe while NVML's own
  // threads sleep. If one of them ran meanwhile, it may have written a page just given back,
  // so NVML is started again and rebuilds its tables. Returns an error text if that restart
  // failed, else "".
  std::string releaseZeroTables(const std::vector<std::string>& threads_before) {
    const auto bss = bssPagesOf(reinterpret_cast<const void*>(init_));
    if (!bss) return {};
    for (int attempt = 1; attempt <= kReleaseAttempts; ++attempt) {
      ThreadsAtRest rest;
      if (!rest.begin(kOwnThreads, threads_before)) {
        // A thread just started may not have reached its wait yet: look again shortly.
        std::this_thread::sleep_for(kSettle);
        continue;
      }
      const ReleasedPages released = releaseZeroPages(*bss);
      if (rest.stillAtRest()) {
        spdlog::info(
            "gave back {} kB of NVML's zero-filled tables ({} kB resident, {} kB of .bss; {} "
            "NVML thread(s) asleep throughout; --nvml-keep-zero-pages keeps them)",
            released.released_bytes / 1024, released.resident_bytes / 1024, bss->bytes() / 1024,
            rest.threads());
        return {};
      }
      spdlog::info("an NVML thread ran while its tables were given back: NVML restarted ({}/{})",
                   attempt, kReleaseAttempts);
      shutdown_();
      if (const nvml::Return rc = init_(); rc != nvml::kSuccess) {
        initialised_ = false;
        g_holding.fetch_sub(1);
        return "nvmlInit_v2 failed when NVML was restarted: " + describe(rc);
      }
    }
    spdlog::info("NVML's tables kept ({} kB): its threads were not seen asleep in {} tries",
                 bss->bytes() / 1024, kReleaseAttempts);
    return {};
  }

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
      case nvml::kErrorNotSupported:
        r.code = DriverCode::kNotSupported;
        break;
      case nvml::kErrorNotFound:
        r.code = DriverCode::kNoNewData;
        break;
      case nvml::kErrorGpuIsLost:
        r.code = DriverCode::kGpuLost;
        break;
      default:
        r.code = DriverCode::kError;
        break;
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
      case nvml::kValueDouble:
        return v.dVal;
      case nvml::kValueUnsignedInt:
        return v.uiVal;
      case nvml::kValueUnsignedLong:
        return static_cast<double>(v.ulVal);
      case nvml::kValueUnsignedLongLong:
        return static_cast<double>(v.ullVal);
      case nvml::kValueSignedLongLong:
        return static_cast<double>(v.sllVal);
      case nvml::kValueSignedInt:
        return v.siVal;
    }
    return -1;  // unknown type: the collector's range check drops it
  }

  // Two GPM sample buffers per GPU, swapped each call: metrics need the counters at both ends.
  struct Gpm {
    bool checked = false;
    std::string unsupported;
    nvml::GpmSample previous = nullptr;
    nvml::GpmSample current = nullptr;
    bool have_previous = false;
  };

  std::string library_;
  NvmlOptions options_;
  void* handle_ = nullptr;
  std::vector<Gpm> gpm_;
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
  nvml::DeviceGetPowerUsageFn get_power_ = nullptr;
  nvml::GpmQueryDeviceSupportFn gpm_query_ = nullptr;
  nvml::GpmSampleAllocFn gpm_alloc_ = nullptr;
  nvml::GpmSampleFreeFn gpm_free_ = nullptr;
  nvml::GpmSampleGetFn gpm_get_ = nullptr;
  nvml::GpmMetricsGetFn gpm_metrics_ = nullptr;
  std::vector<nvml::ProcessInfo> process_infos_;
};

}  // namespace

std::unique_ptr<GpuDriver> makeNvmlDriver(std::string library, NvmlOptions options) {
  return std::make_unique<NvmlDriver>(std::move(library), options);
}

}  // namespace stallwatch::collectors
