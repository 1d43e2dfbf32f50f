#include "model/incident.h"
#include "model/series.h"

namespace stallwatch::model {

const char* toString(ProgressSignal signal) {
  switch (signal) {
    case ProgressSignal::kNone: return "";
    case ProgressSignal::kSteps: return "steps";
    case ProgressSignal::kGpuWork: return "gpu_work";
    case ProgressSignal::kSlowestRankGpuUtil: return "gpu_util_slowest_rank";
    case ProgressSignal::kGpuUtil: return "gpu_util";
  }
  return "";
}

const char* toString(StallClass c) {
  switch (c) {
    case StallClass::kDiskSlow: return "disk-slow";
    case StallClass::kIoThrottled: return "io-throttled";
    case StallClass::kInputCpu: return "input-cpu";
    case StallClass::kCheckpoint: return "checkpoint";
    case StallClass::kNotStorage: return "not-storage";
  }
  return "?";
}

StallClass stallClassFromString(const std::string& text) {
  for (int c = 0; c < kStallClassCount; ++c) {
    if (text == toString(static_cast<StallClass>(c))) return static_cast<StallClass>(c);
  }
  return StallClass::kNotStorage;
}

const char* toString(IncidentEventKind kind) {
  switch (kind) {
    case IncidentEventKind::kOpen: return "open";
    case IncidentEventKind::kChange: return "change";
    case IncidentEventKind::kClose: return "close";
  }
  return "?";
}

}  // namespace stallwatch::model
