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

enum SamplingType : unsigned { kGpuUtilizationSamples = 1 };          // nvmlSamplingType_t
enum ValueType : unsigned {                                            // nvmlValueType_t
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

struct Sample {  // nvmlSample_t
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

inline constexpr unsigned kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// Function types, one per symbol resolved from libnvidia-ml.so.1.
using InitFn = Return (*)();                                          // nvmlInit_v2
using ShutdownFn = Return (*)();                                      // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                        // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                   // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);   // ..._v2
using DeviceGetNameFn = Return (*)(Device, char*, unsigned int);
using DeviceGetUuidFn = Return (*)(Device, char*, unsigned int);      // nvmlDeviceGetUUID
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using DeviceGetSamplesFn = Return (*)(Device, SamplingType, unsigned long long, ValueType*,
                                      unsigned int*, Sample*);
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);
using DeviceGetClockInfoFn = Return (*)(Device, ClockType, unsigned int*);
using DeviceGetPcieThroughputFn = Return (*)(Device, PcieUtilCounter, unsigned int*);
using DeviceGetComputeRunningProcessesFn = Return (*)(Device, unsigned int*, ProcessInfo*);  // _v3
using DeviceGetProcessUtilizationFn = Return (*)(Device, ProcessUtilizationSample*, unsigned int*,
                                                 unsigned long long);

}  // namespace stallwatch::nvml
