// The slice of the NVML C API that stallwatch uses, declared here so that the build needs no
// nvml.h and the library can be loaded with dlopen at run time. Names, values and layouts
// follow NVIDIA's nvml.h (CUDA Toolkit); nvml_abi_check.cpp compares them with the real
// header at compile time wherever the toolkit's nvml.h is present.
#pragma once

namespace stallwatch::nvml {

// nvmlReturn_t (subset; other codes are reported by number).
enum Return : unsigned {
  kSuccess = 0,
  kErrorUninitialized = 1,
  kErrorInvalidArgument = 2,
  kErrorNotSupported = 3,
  kErrorNoPermission = 4,
  kErrorNotFound = 6,
  kErrorInsufficientSize = 7,
  kErrorDriverNotLoaded = 9,
  kErrorGpuIsLost = 15,
  kErrorUnknown = 999,
};

struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

enum SamplingType : unsigned { kGpuUtilizationSamples = 1 };  // nvmlSamplingType_t
enum ValueType : unsigned {                                   // nvmlValueType_t
  kValueDouble = 0,
  kValueUnsignedInt = 1,
  kValueUnsignedLong = 2,
  kValueUnsignedLongLong = 3,
  kValueSignedLongLong = 4,
  kValueSignedInt = 5,
};
enum ClockType : unsigned { kClockGraphics = 0, kClockSm = 1, kClockMem = 2 };  // nvmlClockType_t
enum PcieUtilCounter : unsigned { kPcieTxBytes = 0, kPcieRxBytes = 1 };  // nvmlPcieUtilCounter_t

union Value {  // nvmlValue_t
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
};

struct Sample {                  // nvmlSample_t
  unsigned long long timeStamp;  // CPU timestamp, microseconds
  Value sampleValue;
};

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

struct Memory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

struct ProcessInfo {  // nvmlProcessInfo_t (the v2 layout that ..._v3 functions fill)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// GPU Performance Monitoring (Hopper and later): two samples of the device's counters, and
// metrics computed between them (nvmlGpmMetricId_t, nvmlGpmMetric_t, nvmlGpmMetricsGet_t).
struct GpmSampleOpaque;
using GpmSample = GpmSampleOpaque*;  // nvmlGpmSample_t
enum GpmMetricId : unsigned {
  kGpmSmUtil = 2,         // NVML_GPM_METRIC_SM_UTIL: share of SMs busy, time-averaged
  kGpmSmOccupancy = 3,    // NVML_GPM_METRIC_SM_OCCUPANCY: resident warps / the maximum
  kGpmAnyTensorUtil = 5,  // NVML_GPM_METRIC_ANY_TENSOR_UTIL
  kGpmDramBwUtil = 10,    // NVML_GPM_METRIC_DRAM_BW_UTIL
};
struct GpmMetric {
  unsigned int metricId;
  Return nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
// The library reads numMetrics entries; nvml.h's array length (NVML_GPM_METRIC_MAX) grew
// between releases, and only the fields before the array are checked against it.
inline constexpr unsigned kGpmMetricsMax = 8;
struct GpmMetricsGet {
  unsigned int version;
  unsigned int numMetrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricsMax];
};
inline constexpr unsigned kGpmMetricsGetVersion = 1;  // NVML_GPM_METRICS_GET_VERSION
struct GpmSupport {
  unsigned int version;
  unsigned int isSupportedDevice;
};
inline constexpr unsigned kGpmSupportVersion = 1;  // NVML_GPM_SUPPORT_VERSION

inline constexpr unsigned kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// Function types, one per symbol resolved from libnvidia-ml.so.1.
using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned int);  // nvmlDeviceGetUUID
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using DeviceGetSamplesFn = Return (*)(Device, SamplingType, unsigned long long, ValueType*,
                                      unsigned int*, Sample*);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetClockInfoFn = Return (*)(Device, ClockType, unsigned int*);
using DeviceGetPcieThroughputFn = Return (*)(Device, PcieUtilCounter, unsigned int*);
using DeviceGetComputeRunningProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);  // _v3
using DeviceGetPowerUsageFn = Return (*)(Device, unsigned int*);  // milliwatts
using GpmQueryDeviceSupportFn = Return (*)(Device, GpmSupport*);
using GpmSampleAllocFn = Return (*)(GpmSample*);
using GpmSampleFreeFn = Return (*)(GpmSample);
using GpmSampleGetFn = Return (*)(Device, GpmSample);
using GpmMetricsGetFn = Return (*)(GpmMetricsGet*);
using DeviceGetProcessUtilizationFn = Return (*)(Device, ProcessUtilizationSample*, unsigned int*,
                                                 unsigned long long);

}  // namespace stallwatch::nvml
