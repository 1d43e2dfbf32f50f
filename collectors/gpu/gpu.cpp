#include "collectors/gpu/gpu.h"

#include <algorithm>
#include <map>
#include <utility>

namespace stallwatch::collectors {
namespace {

constexpr double kMaxPercent = 100.0;

bool inPercentRange(double value) { return value >= 0.0 && value <= kMaxPercent; }

}  // namespace

GpuCollector::GpuCollector(std::unique_ptr<GpuDriver> driver, GpuCollectorOptions options)
    : driver_(std::move(driver)), options_(std::move(options)) {
  auto init = driver_->init();
  if (!init.ok()) {
    unavailable_ = init.message;
    return;
  }
  auto devices = driver_->devices();
  if (!devices.ok()) {
    unavailable_ = devices.message;
    return;
  }
  std::vector<std::string> unmatched;
  gpus_ = selectGpus(devices.value, options_.only, &unmatched);
  state_.resize(gpus_.size());
  if (!unmatched.empty()) {
    std::string names;
    for (const auto& u : unmatched) names += (names.empty() ? "" : ", ") + u;
    pending_notice_ = "no GPU " + names +
                      " on this host (--gpu takes a UUID or an index as nvidia-smi gives them)";
  }
  if (gpus_.empty()) {
    unavailable_ = pending_notice_.empty() ? "the NVIDIA driver reports no GPU" : pending_notice_;
  }
}

std::vector<GpuInfo> selectGpus(const std::vector<GpuInfo>& all,
                                const std::vector<std::string>& selection,
                                std::vector<std::string>* unmatched) {
  if (selection.empty()) return all;
  std::vector<GpuInfo> out;
  for (const auto& wanted : selection) {
    auto it = std::find_if(all.begin(), all.end(), [&](const GpuInfo& g) {
      return g.uuid == wanted || std::to_string(g.index) == wanted;
    });
    if (it == all.end()) {
      if (unmatched) unmatched->push_back(wanted);
    } else if (std::none_of(out.begin(), out.end(),
                            [&](const GpuInfo& g) { return g.uuid == it->uuid; })) {
      out.push_back(*it);
    }
  }
  return out;
}

std::optional<double> GpuCollector::utilization(uint32_t index, PerGpu& state, GpuSample& sample,
                                                uint64_t& skipped) {
  using Source = GpuCollectorOptions::Utilization;
  const bool buffer = options_.utilization == Source::kSamples ||
                      (options_.utilization == Source::kAuto && !state.activity_seen);
  if (samples_supported_ && buffer) {
    auto samples = driver_->utilizationSamples(index, state.last_sample_us);
    if (samples.ok() || samples.code == DriverCode::kNoNewData) {
      double sum = 0;
      uint32_t used = 0;
      const bool first = state.last_sample_us == 0;
      for (const auto& s : samples.value) {
        state.last_sample_us = std::max(state.last_sample_us, s.timestamp_us);
        if (first) continue;  // the driver's buffer reaches back before our interval
        if (!inPercentRange(s.percent)) {
          ++skipped;
          ++counters_.out_of_range_values;
          continue;
        }
        sum += s.percent;
        ++used;
      }
      sample.utilization_sample_count = used;
      if (used > 0) return sum / used;
      if (!first) return std::nullopt;
      // First interval: nothing to average yet, fall through to the instantaneous reading.
    } else if (samples.code == DriverCode::kNotSupported) {
      samples_supported_ = false;
    } else {
      return std::nullopt;
    }
  }
  auto rates = driver_->utilizationRates(index);
  if (!rates.ok()) return std::nullopt;
  sample.utilization_sample_count = 1;
  if (inPercentRange(rates.value.memory_percent)) {
    sample.memory_utilization_percent = rates.value.memory_percent;
  }
  if (!inPercentRange(rates.value.gpu_percent)) {
    ++skipped;
    ++counters_.out_of_range_values;
    return std::nullopt;
  }
  return rates.value.gpu_percent;
}

void GpuCollector::readActivity(const GpuInfo& gpu, PerGpu& state, GpuSample& sample,
                                uint64_t& skipped, std::string& notice) {
  if (auto power = driver_->powerWatts(gpu.index); power.ok() && power.value >= 0)
    sample.power_watts = power.value;
  if (!options_.activity || state.activity_unsupported) return;
  auto activity = driver_->activity(gpu.index);
  if (activity.code == DriverCode::kNotSupported) {
    // Said once per GPU: the correlator then judges this GPU by utilisation alone.
    state.activity_unsupported = true;
    notice +=
        (notice.empty() ? "" : "; ") + std::string("GPU ") + std::to_string(gpu.index) +
        ": no GPM activity metrics (" + activity.message +
        "); judging it by utilisation, which counts a collective waiting for another rank as busy";
    return;
  }
  if (!activity.ok()) return;
  state.activity_seen = true;
  auto keep = [&](const std::optional<double>& v, std::optional<double>& into) {
    if (!v) return;
    if (!inPercentRange(*v)) {
      ++skipped;
      ++counters_.out_of_range_values;
      return;
    }
    into = *v;
  };
  keep(activity.value.sm_active_percent, sample.sm_active_percent);
  keep(activity.value.sm_occupancy_percent, sample.sm_occupancy_percent);
  keep(activity.value.tensor_active_percent, sample.tensor_active_percent);
  keep(activity.value.dram_active_percent, sample.dram_active_percent);
}

CollectResult GpuCollector::collect(const Tick& /*tick*/, SampleBatch& out) {
  if (gpus_.empty()) return CollectResult::unavailableHere(unavailable_);
  uint64_t skipped = 0;
  size_t reported = 0;
  std::string problem;
  std::string notice = std::exchange(pending_notice_, std::string());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const GpuInfo& gpu = gpus_[i];
    PerGpu& state = state_[i];
    if (state.lost) continue;
    GpuSample sample;
    sample.gpu_index = gpu.index;
    sample.uuid = gpu.uuid;
    sample.utilization_percent = utilization(gpu.index, state, sample, skipped);
    if (!sample.memory_utilization_percent) {
      if (auto rates = driver_->utilizationRates(gpu.index);
          rates.ok() && inPercentRange(rates.value.memory_percent)) {
        sample.memory_utilization_percent = rates.value.memory_percent;
      }
    }
    auto memory = driver_->memory(gpu.index);
    if (memory.code == DriverCode::kGpuLost) {
      state.lost = true;
      ++counters_.lost_gpu_events;
      problem =
          "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ") is lost: " + memory.message;
      continue;
    }
    if (memory.ok() && memory.value.used_bytes <= memory.value.total_bytes) {
      sample.memory_used_bytes = memory.value.used_bytes;
      sample.memory_total_bytes = memory.value.total_bytes;
    }
    if (auto clock = driver_->smClockMhz(gpu.index); clock.ok()) sample.sm_clock_mhz = clock.value;
    readActivity(gpu, state, sample, skipped, notice);
    if (options_.pcie) {
      if (auto tx = driver_->pcieBytesPerSecond(gpu.index, PcieDirection::kTx); tx.ok()) {
        sample.pcie_tx_bytes_per_second = tx.value;
      }
      if (auto rx = driver_->pcieBytesPerSecond(gpu.index, PcieDirection::kRx); rx.ok()) {
        sample.pcie_rx_bytes_per_second = rx.value;
      }
    }
    // Per-process utilisation every process_every_ticks intervals: the driver keeps the
    // samples, and one call returns all of them since the last.
    bool processes_due = false;
    if (options_.per_process && state.ticks_to_processes == 0) {
      processes_due = true;
      state.ticks_to_processes = std::max<uint32_t>(1, options_.process_every_ticks) - 1;
    } else if (options_.per_process) {
      --state.ticks_to_processes;
    }
    if (processes_due) {
      auto processes = driver_->processUtilization(gpu.index, state.last_process_us);
      const bool first = state.last_process_us == 0;
      // The driver may return several samples per process in one interval: average them.
      struct Sums {
        double sm = 0, memory = 0;
        uint32_t sm_n = 0, memory_n = 0;
      };
      std::map<uint32_t, Sums> by_pid;
      for (const auto& p : processes.value) {
        state.last_process_us = std::max(state.last_process_us, p.timestamp_us);
        if (first || !processes.ok()) continue;
        Sums& sums = by_pid[p.pid];
        if (inPercentRange(p.sm_percent)) {
          sums.sm += p.sm_percent;
          ++sums.sm_n;
        } else {
          ++skipped;
          ++counters_.out_of_range_values;
        }
        if (inPercentRange(p.memory_percent)) {
          sums.memory += p.memory_percent;
          ++sums.memory_n;
        }
      }
      for (const auto& [pid, sums] : by_pid) {
        GpuProcessSample ps;
        ps.gpu_index = gpu.index;
        ps.uuid = gpu.uuid;
        ps.pid = pid;
        if (sums.sm_n) ps.sm_utilization_percent = sums.sm / sums.sm_n;
        if (sums.memory_n) ps.memory_utilization_percent = sums.memory / sums.memory_n;
        out.gpu_processes.push_back(std::move(ps));
      }
    }
    if (!described_) gpus_[i].memory_total_bytes = sample.memory_total_bytes;
    out.gpus.push_back(std::move(sample));
    ++reported;
  }
  if (reported != 0 && !described_) {
    out.gpu_updates = gpus_;  // described once, with the first readings
    described_ = true;
  }
  CollectResult result = reported == 0
                             ? CollectResult::error(problem.empty() ? "no GPU answered" : problem)
                             : CollectResult::data(skipped);
  if (reported != 0) result.message = problem;
  result.notice = notice;
  return result;
}

}  // namespace stallwatch::collectors
