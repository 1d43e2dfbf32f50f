// Compiled only where the CUDA Toolkit's nvml.h is found: checks at compile time that
// nvml_api.h's declarations match NVIDIA's (enum values, struct layouts, and every function
// type, with our types mapped onto theirs). A mismatch fails the build, not a GPU host.
#include <nvml.h>

#include <cstddef>
#include <type_traits>

#include "collectors/gpu/nvml_api.h"

namespace stallwatch::nvml {
namespace {

// Maps a type written with stallwatch::nvml's names to the same type in nvml.h's names.
template <typename T>
struct Theirs {
  using type = T;
};
template <>
struct Theirs<Return> {
  using type = nvmlReturn_t;
};
template <>
struct Theirs<Device> {
  using type = nvmlDevice_t;
};
template <>
struct Theirs<SamplingType> {
  using type = nvmlSamplingType_t;
};
template <>
struct Theirs<ValueType> {
  using type = nvmlValueType_t;
};
template <>
struct Theirs<ClockType> {
  using type = nvmlClockType_t;
};
template <>
struct Theirs<PcieUtilCounter> {
  using type = nvmlPcieUtilCounter_t;
};
template <>
struct Theirs<Sample> {
  using type = nvmlSample_t;
};
template <>
struct Theirs<Utilization> {
  using type = nvmlUtilization_t;
};
template <>
struct Theirs<Memory> {
  using type = nvmlMemory_t;
};
template <>
struct Theirs<ProcessInfo> {
  using type = nvmlProcessInfo_t;
};
template <>
struct Theirs<ProcessUtilizationSample> {
  using type = nvmlProcessUtilizationSample_t;
};
template <>
struct Theirs<GpmSample> {
  using type = nvmlGpmSample_t;
};
template <>
struct Theirs<GpmSupport> {
  using type = nvmlGpmSupport_t;
};
template <>
struct Theirs<GpmMetricsGet> {
  using type = nvmlGpmMetricsGet_t;
};
template <typename T>
struct Theirs<T*> {
  using type = typename Theirs<T>::type*;
};
template <typename T>
struct Theirs<const T> {
  using type = const typename Theirs<T>::type;
};
template <typename R, typename... A>
struct Theirs<R (*)(A...)> {
  using type = typename Theirs<R>::type (*)(typename Theirs<A>::type...);
};
template <typename Ours, typename Real>
constexpr bool kSameFunction = std::is_same_v<typename Theirs<Ours>::type, Real>;

#define SW_CHECK_FN(OURS, SYMBOL) \
  static_assert(kSameFunction<OURS, decltype(&::SYMBOL)>, #SYMBOL " differs from nvml.h")
SW_CHECK_FN(InitFn, nvmlInit_v2);
SW_CHECK_FN(ShutdownFn, nvmlShutdown);
SW_CHECK_FN(ErrorStringFn, nvmlErrorString);
SW_CHECK_FN(DeviceGetCountFn, nvmlDeviceGetCount_v2);
SW_CHECK_FN(DeviceGetHandleByIndexFn, nvmlDeviceGetHandleByIndex_v2);
SW_CHECK_FN(DeviceGetNameFn, nvmlDeviceGetName);
SW_CHECK_FN(DeviceGetUuidFn, nvmlDeviceGetUUID);
SW_CHECK_FN(DeviceGetUtilizationRatesFn, nvmlDeviceGetUtilizationRates);
SW_CHECK_FN(DeviceGetSamplesFn, nvmlDeviceGetSamples);
SW_CHECK_FN(DeviceGetMemoryInfoFn, nvmlDeviceGetMemoryInfo);
SW_CHECK_FN(DeviceGetClockInfoFn, nvmlDeviceGetClockInfo);
SW_CHECK_FN(DeviceGetPcieThroughputFn, nvmlDeviceGetPcieThroughput);
SW_CHECK_FN(DeviceGetProcessUtilizationFn, nvmlDeviceGetProcessUtilization);
SW_CHECK_FN(DeviceGetComputeRunningProcessesFn, nvmlDeviceGetComputeRunningProcesses_v3);
SW_CHECK_FN(DeviceGetPowerUsageFn, nvmlDeviceGetPowerUsage);
SW_CHECK_FN(GpmQueryDeviceSupportFn, nvmlGpmQueryDeviceSupport);
SW_CHECK_FN(GpmSampleAllocFn, nvmlGpmSampleAlloc);
SW_CHECK_FN(GpmSampleFreeFn, nvmlGpmSampleFree);
SW_CHECK_FN(GpmSampleGetFn, nvmlGpmSampleGet);
SW_CHECK_FN(GpmMetricsGetFn, nvmlGpmMetricsGet);
#undef SW_CHECK_FN

#define SW_CHECK_LAYOUT(OURS, THEIRS, FIELD)                        \
  static_assert(offsetof(OURS, FIELD) == offsetof(THEIRS, FIELD) && \
                    sizeof(OURS::FIELD) == sizeof(THEIRS::FIELD),   \
                #THEIRS "." #FIELD " differs from nvml.h")
static_assert(sizeof(Value) == sizeof(nvmlValue_t));
static_assert(sizeof(Sample) == sizeof(nvmlSample_t));
SW_CHECK_LAYOUT(Sample, nvmlSample_t, timeStamp);
SW_CHECK_LAYOUT(Sample, nvmlSample_t, sampleValue);
static_assert(sizeof(Utilization) == sizeof(nvmlUtilization_t));
SW_CHECK_LAYOUT(Utilization, nvmlUtilization_t, gpu);
SW_CHECK_LAYOUT(Utilization, nvmlUtilization_t, memory);
static_assert(sizeof(Memory) == sizeof(nvmlMemory_t));
SW_CHECK_LAYOUT(Memory, nvmlMemory_t, total);
SW_CHECK_LAYOUT(Memory, nvmlMemory_t, free);
SW_CHECK_LAYOUT(Memory, nvmlMemory_t, used);
static_assert(sizeof(ProcessUtilizationSample) == sizeof(nvmlProcessUtilizationSample_t));
SW_CHECK_LAYOUT(ProcessUtilizationSample, nvmlProcessUtilizationSample_t, pid);
SW_CHECK_LAYOUT(ProcessUtilizationSample, nvmlProcessUtilizationSample_t, timeStamp);
SW_CHECK_LAYOUT(ProcessUtilizationSample, nvmlProcessUtilizationSample_t, smUtil);
SW_CHECK_LAYOUT(ProcessUtilizationSample, nvmlProcessUtilizationSample_t, memUtil);
static_assert(sizeof(ProcessInfo) == sizeof(nvmlProcessInfo_t));
SW_CHECK_LAYOUT(ProcessInfo, nvmlProcessInfo_t, pid);
SW_CHECK_LAYOUT(ProcessInfo, nvmlProcessInfo_t, usedGpuMemory);
SW_CHECK_LAYOUT(ProcessInfo, nvmlProcessInfo_t, gpuInstanceId);
SW_CHECK_LAYOUT(ProcessInfo, nvmlProcessInfo_t, computeInstanceId);
static_assert(sizeof(GpmMetric) == sizeof(nvmlGpmMetric_t));
SW_CHECK_LAYOUT(GpmMetric, nvmlGpmMetric_t, metricId);
SW_CHECK_LAYOUT(GpmMetric, nvmlGpmMetric_t, nvmlReturn);
SW_CHECK_LAYOUT(GpmMetric, nvmlGpmMetric_t, value);
SW_CHECK_LAYOUT(GpmMetric, nvmlGpmMetric_t, metricInfo);
SW_CHECK_LAYOUT(GpmMetricsGet, nvmlGpmMetricsGet_t, version);
SW_CHECK_LAYOUT(GpmMetricsGet, nvmlGpmMetricsGet_t, numMetrics);
SW_CHECK_LAYOUT(GpmMetricsGet, nvmlGpmMetricsGet_t, sample1);
SW_CHECK_LAYOUT(GpmMetricsGet, nvmlGpmMetricsGet_t, sample2);
static_assert(offsetof(GpmMetricsGet, metrics) == offsetof(nvmlGpmMetricsGet_t, metrics));
static_assert(kGpmMetricsMax <= NVML_GPM_METRIC_MAX);
static_assert(sizeof(GpmSupport) == sizeof(nvmlGpmSupport_t));
SW_CHECK_LAYOUT(GpmSupport, nvmlGpmSupport_t, version);
SW_CHECK_LAYOUT(GpmSupport, nvmlGpmSupport_t, isSupportedDevice);
#undef SW_CHECK_LAYOUT

// Enumerators compared as integers: ours and NVIDIA's are distinct enum types by design.
#define SW_SAME(OURS, THEIRS) (static_cast<long long>(OURS) == static_cast<long long>(THEIRS))
static_assert(SW_SAME(kSuccess, NVML_SUCCESS) &&
              SW_SAME(kErrorUninitialized, NVML_ERROR_UNINITIALIZED) &&
              SW_SAME(kErrorInvalidArgument, NVML_ERROR_INVALID_ARGUMENT) &&
              SW_SAME(kErrorNotSupported, NVML_ERROR_NOT_SUPPORTED) &&
              SW_SAME(kErrorNoPermission, NVML_ERROR_NO_PERMISSION) &&
              SW_SAME(kErrorNotFound, NVML_ERROR_NOT_FOUND) &&
              SW_SAME(kErrorInsufficientSize, NVML_ERROR_INSUFFICIENT_SIZE) &&
              SW_SAME(kErrorDriverNotLoaded, NVML_ERROR_DRIVER_NOT_LOADED) &&
              SW_SAME(kErrorGpuIsLost, NVML_ERROR_GPU_IS_LOST) &&
              SW_SAME(kErrorUnknown, NVML_ERROR_UNKNOWN));
static_assert(SW_SAME(kGpuUtilizationSamples, NVML_GPU_UTILIZATION_SAMPLES));
static_assert(SW_SAME(kValueDouble, NVML_VALUE_TYPE_DOUBLE) &&
              SW_SAME(kValueUnsignedInt, NVML_VALUE_TYPE_UNSIGNED_INT) &&
              SW_SAME(kValueUnsignedLong, NVML_VALUE_TYPE_UNSIGNED_LONG) &&
              SW_SAME(kValueUnsignedLongLong, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG) &&
              SW_SAME(kValueSignedLongLong, NVML_VALUE_TYPE_SIGNED_LONG_LONG));
static_assert(SW_SAME(kClockGraphics, NVML_CLOCK_GRAPHICS) && SW_SAME(kClockSm, NVML_CLOCK_SM) &&
              SW_SAME(kClockMem, NVML_CLOCK_MEM));
static_assert(SW_SAME(kPcieTxBytes, NVML_PCIE_UTIL_TX_BYTES) &&
              SW_SAME(kPcieRxBytes, NVML_PCIE_UTIL_RX_BYTES));
static_assert(SW_SAME(kGpmSmUtil, NVML_GPM_METRIC_SM_UTIL) &&
              SW_SAME(kGpmSmOccupancy, NVML_GPM_METRIC_SM_OCCUPANCY) &&
              SW_SAME(kGpmAnyTensorUtil, NVML_GPM_METRIC_ANY_TENSOR_UTIL) &&
              SW_SAME(kGpmDramBwUtil, NVML_GPM_METRIC_DRAM_BW_UTIL));
static_assert(kGpmMetricsGetVersion == NVML_GPM_METRICS_GET_VERSION &&
              kGpmSupportVersion == NVML_GPM_SUPPORT_VERSION);
static_assert(kDeviceNameBufferSize == NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(kDeviceUuidBufferSize == NVML_DEVICE_UUID_V2_BUFFER_SIZE);
#undef SW_SAME

}  // namespace
}  // namespace stallwatch::nvml
