// What the live correlator adds to each sampling cycle: LiveCorrelator::onBatch for jobs
// whose window is full (one hour at one second), healthy or in the middle of a stall, with
// the standing verdict over the last minute judged every 5 intervals (limiter 1) or not
// (limiter 0: judged once, at the start).
//   build/bench/live_correlator_bench
#include <benchmark/benchmark.h>

#include <random>

#include "correlator/live_correlator.h"

namespace {

using stallwatch::collectors::SampleBatch;

SampleBatch batch(size_t i, size_t jobs, bool stalled, std::mt19937& rng) {
  auto noise = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  SampleBatch b;
  b.wall_time_ms = 1'000'000 + static_cast<int64_t>(i) * 1000;
  b.interval_seconds = 1;
  for (size_t j = 0; j < jobs; ++j) {
    const std::string key = "pid:" + std::to_string(100 + j) + ":1";
    if (i == 0) {
      stallwatch::collectors::JobDescription d;
      d.key = key;
      d.gpus = {"GPU-" + std::to_string(j)};
      b.job_updates.push_back(d);
      b.job_devices.push_back({key, "nvme0n1", 259, 0, "", 1});
      b.job_devices.push_back(
          {key, "loop" + std::to_string(j), 7, static_cast<uint32_t>(j), "", 1});
    }
    stallwatch::collectors::JobSample s;
    s.key = key;
    s.gpus = {"GPU-" + std::to_string(j)};
    s.gpu_util_percent = stalled ? noise(0, 5) : noise(60, 90);
    s.read_bytes_per_second = 1e8;
    // What the standing verdict reads: the hook's wait, the workers, the main thread.
    s.steps = stalled ? 1 : 20;
    s.data_wait_seconds = noise(0.3, 0.4);
    s.step_seconds = 1 - *s.data_wait_seconds;
    s.workers = 8;
    s.workers_cpu_ratio = noise(6, 7);
    s.main_thread_cpu_ratio = noise(0.5, 0.6);
    s.main_thread_loader_wait_ratio = noise(0.3, 0.4);
    s.main_thread_futex_wait_ratio = 0.1;
    b.jobs.push_back(s);
  }
  for (const char* name : {"nvme0n1", "loop0", "loop1", "loop2", "loop3", "sda", "sdb", "sdc"}) {
    stallwatch::collectors::DiskSample d;
    d.device = name;
    d.rates.r_await_ms = stalled ? noise(30, 60) : noise(0.1, 0.3);
    d.rates.aqu_sz = noise(0.2, 1);
    b.disks.push_back(d);
  }
  b.pressure = {{"io", 0.02, 0.0, {}, {}}, {"cpu", 0.01, 0.0, {}, {}}};
  b.cpu = stallwatch::collectors::CpuSample{6.0, 0.1, 16};
  return b;
}

void BM_OnBatch(benchmark::State& state) {
  const size_t jobs = static_cast<size_t>(state.range(0));
  const bool stalled = state.range(1) != 0;
  std::mt19937 rng(1);
  stallwatch::correlator::LiveConfig config;
  if (state.range(2) == 0) config.limiter_every = SIZE_MAX;  // judged once, then never
  stallwatch::correlator::LiveCorrelator c(config);
  size_t i = 0;
  for (; i < 3600; ++i) c.onBatch(batch(i, jobs, false, rng));
  std::vector<SampleBatch> next;
  for (size_t k = 0; k < 64; ++k) next.push_back(batch(i + k, jobs, stalled, rng));
  size_t k = 0;
  for (auto _ : state) {
    SampleBatch b = next[k % next.size()];
    b.wall_time_ms = 1'000'000 + static_cast<int64_t>(i++) * 1000;
    benchmark::DoNotOptimize(c.onBatch(b));
    ++k;
  }
}
BENCHMARK(BM_OnBatch)
    ->ArgNames({"jobs", "stalled", "limiter"})
    ->Args({1, 0, 0})
    ->Args({1, 0, 1})
    ->Args({1, 1, 1})
    ->Args({4, 0, 0})
    ->Args({4, 0, 1})
    ->Args({4, 1, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
