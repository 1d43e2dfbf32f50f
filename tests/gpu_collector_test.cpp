#include <gtest/gtest.h>

#include "collectors/gpu/gpu.h"
#include "fake_gpu_driver.h"

namespace stallwatch::collectors {
namespace {

using testing::FakeGpuDriver;

struct Harness {
  FakeGpuDriver* fake;
  std::unique_ptr<GpuCollector> collector;
};

GpuCollectorOptions withPcie() {
  GpuCollectorOptions o;
  o.pcie = true;
  o.per_process = true;
  o.process_every_ticks = 1;
  return o;
}

Harness make(std::function<void(FakeGpuDriver&)> setup, GpuCollectorOptions options = withPcie()) {
  auto driver = std::make_unique<FakeGpuDriver>();
  FakeGpuDriver* raw = driver.get();
  FakeGpuDriver::Gpu gpu;
  gpu.info = {0, "GPU-0000", "Fake H100", {}};
  raw->gpus.push_back(gpu);
  setup(*raw);
  return {raw, std::make_unique<GpuCollector>(std::move(driver), options)};
}

SampleBatch collect(GpuCollector& c) {
  SampleBatch batch;
  c.collect({}, batch);
  return batch;
}

TEST(GpuCollector, AveragesTheDriversSamplesWithinTheInterval) {
  auto h = make([](FakeGpuDriver& f) { f.gpus[0].samples = {{100, 10}, {200, 20}}; });
  // First interval: the buffer reaches back before us; only the instantaneous reading counts.
  h.fake->gpus[0].rates = {55, 7};
  auto first = collect(*h.collector);
  ASSERT_EQ(first.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*first.gpus[0].utilization_percent, 55.0);
  h.fake->gpus[0].samples.push_back({300, 90});
  h.fake->gpus[0].samples.push_back({400, 100});
  h.fake->gpus[0].samples.push_back({500, 95});
  auto second = collect(*h.collector);
  ASSERT_EQ(second.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*second.gpus[0].utilization_percent, 95.0);
  EXPECT_EQ(second.gpus[0].utilization_sample_count, 3u);
  EXPECT_EQ(second.gpus[0].memory_used_bytes, 1ull << 30);
  EXPECT_EQ(second.gpus[0].sm_clock_mhz, 1980u);
  EXPECT_EQ(second.gpus[0].pcie_tx_bytes_per_second, 1000u);
  EXPECT_EQ(second.gpus[0].pcie_rx_bytes_per_second, 2000u);
}

TEST(GpuCollector, DropsAndCountsUtilisationOver100) {
  auto h = make([](FakeGpuDriver& f) { f.gpus[0].samples = {{100, 10}}; });
  collect(*h.collector);
  h.fake->gpus[0].samples.push_back({200, 4294967295.0});  // the known NVML/DCGM garbage
  h.fake->gpus[0].samples.push_back({300, 80});
  h.fake->gpus[0].samples.push_back({400, 101});
  auto batch = collect(*h.collector);
  ASSERT_EQ(batch.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*batch.gpus[0].utilization_percent, 80.0);
  EXPECT_EQ(h.collector->counters().out_of_range_values, 2u);
}

TEST(GpuCollector, NoNewSamplesGivesNullNotZero) {
  auto h = make([](FakeGpuDriver& f) { f.gpus[0].samples = {{100, 10}}; });
  collect(*h.collector);
  auto batch = collect(*h.collector);
  ASSERT_EQ(batch.gpus.size(), 1u);
  EXPECT_FALSE(batch.gpus[0].utilization_percent);
  EXPECT_EQ(batch.gpus[0].utilization_sample_count, 0u);
}

TEST(GpuCollector, FallsBackToUtilizationRatesWithoutSamples) {
  auto h = make([](FakeGpuDriver& f) {
    f.gpus[0].samples_code = DriverCode::kNotSupported;
    f.gpus[0].rates = {42, 9};
  });
  auto batch = collect(*h.collector);
  ASSERT_EQ(batch.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(*batch.gpus[0].utilization_percent, 42.0);
  EXPECT_DOUBLE_EQ(*batch.gpus[0].memory_utilization_percent, 9.0);
  h.fake->gpus[0].rates = {250, 9};  // out of range: dropped
  batch = collect(*h.collector);
  EXPECT_FALSE(batch.gpus[0].utilization_percent);
  EXPECT_EQ(h.collector->counters().out_of_range_values, 1u);
}

TEST(GpuCollector, NoDriverIsNoDataWithTheReason) {
  auto h = make([](FakeGpuDriver& f) { f.init_code = DriverCode::kNotSupported; });
  SampleBatch batch;
  const auto r = h.collector->collect({}, batch);
  EXPECT_EQ(r.outcome, Outcome::kNoData);
  EXPECT_EQ(r.message, "fake: no driver");
  EXPECT_TRUE(batch.gpus.empty());
}

TEST(GpuCollector, ALostGpuIsSkippedAndTheOthersGoOn) {
  auto h = make([](FakeGpuDriver& f) {
    FakeGpuDriver::Gpu second;
    second.info = {1, "GPU-1111", "Fake H100", {}};
    f.gpus.push_back(second);
  });
  h.fake->gpus[0].memory_code = DriverCode::kGpuLost;
  auto batch = collect(*h.collector);
  ASSERT_EQ(batch.gpus.size(), 1u);
  EXPECT_EQ(batch.gpus[0].uuid, "GPU-1111");
  EXPECT_EQ(h.collector->counters().lost_gpu_events, 1u);
  batch = collect(*h.collector);  // stays skipped, counted once
  EXPECT_EQ(batch.gpus.size(), 1u);
  EXPECT_EQ(h.collector->counters().lost_gpu_events, 1u);
}

TEST(GpuCollector, PerProcessUtilisationIsAveragedPerPid) {
  auto h = make([](FakeGpuDriver& f) { f.gpus[0].processes = {{42, 100, 50, 5}}; });
  collect(*h.collector);
  h.fake->gpus[0].processes.push_back({42, 200, 60, 10});
  h.fake->gpus[0].processes.push_back({42, 300, 80, 20});
  h.fake->gpus[0].processes.push_back({43, 300, 400, 20});  // garbage SM value
  auto batch = collect(*h.collector);
  ASSERT_EQ(batch.gpu_processes.size(), 2u);
  EXPECT_EQ(batch.gpu_processes[0].pid, 42u);
  EXPECT_DOUBLE_EQ(*batch.gpu_processes[0].sm_utilization_percent, 70.0);
  EXPECT_DOUBLE_EQ(*batch.gpu_processes[0].memory_utilization_percent, 15.0);
  EXPECT_EQ(batch.gpu_processes[1].pid, 43u);
  EXPECT_FALSE(batch.gpu_processes[1].sm_utilization_percent);
}

// nvmlDeviceGetProcessUtilization costs milliseconds: read every Nth interval, every sample
// since the last read averaged then.
TEST(GpuCollector, ProcessUtilisationIsReadEveryNthIntervalWithAllItsSamples) {
  GpuCollectorOptions o;
  o.process_every_ticks = 3;
  auto h = make([](FakeGpuDriver& f) { f.gpus[0].processes = {{42, 100, 50, 5}}; }, o);
  collect(*h.collector);  // read: the driver's buffer reaches back before us
  EXPECT_EQ(h.fake->process_calls, 1);
  h.fake->gpus[0].processes.push_back({42, 200, 60, 10});
  EXPECT_TRUE(collect(*h.collector).gpu_processes.empty());
  h.fake->gpus[0].processes.push_back({42, 300, 80, 20});
  EXPECT_TRUE(collect(*h.collector).gpu_processes.empty());
  EXPECT_EQ(h.fake->process_calls, 1);
  auto batch = collect(*h.collector);
  EXPECT_EQ(h.fake->process_calls, 2);
  ASSERT_EQ(batch.gpu_processes.size(), 1u);
  EXPECT_DOUBLE_EQ(*batch.gpu_processes[0].sm_utilization_percent, 70.0);
}

// A GPU with GPM is judged by its GPM work: its utilisation comes from the cheap rate, not
// the sample buffer (2.7 ms of CPU a call). Without GPM the buffer stays: utilisation is all
// the correlator has. Asked for, the buffer is read either way.
TEST(GpuCollector, OnlyGpusWithoutGpmReadTheSampleBuffer) {
  for (const bool gpm : {true, false}) {
    for (const auto source :
         {GpuCollectorOptions::Utilization::kAuto, GpuCollectorOptions::Utilization::kSamples}) {
      GpuCollectorOptions o;
      o.utilization = source;
      auto h = make(
          [&](FakeGpuDriver& f) {
            f.gpus[0].samples = {{100, 10}};
            f.gpus[0].rates = {64, 7};
            if (gpm) f.gpus[0].activity_code = DriverCode::kOk;
          },
          o);
      collect(*h.collector);
      const int after_first = h.fake->samples_calls;
      h.fake->gpus[0].samples.push_back({200, 30});
      auto second = collect(*h.collector);
      const bool buffer = !gpm || source == GpuCollectorOptions::Utilization::kSamples;
      EXPECT_EQ(h.fake->samples_calls - after_first, buffer ? 1 : 0) << gpm;
      EXPECT_DOUBLE_EQ(*second.gpus[0].utilization_percent, buffer ? 30.0 : 64.0) << gpm;
    }
  }
}

TEST(GpuCollector, PcieIsOffByDefault) {
  auto h = make([](FakeGpuDriver&) {}, GpuCollectorOptions{});
  auto batch = collect(*h.collector);
  EXPECT_EQ(h.fake->pcie_calls, 0);
  EXPECT_FALSE(batch.gpus[0].pcie_tx_bytes_per_second);
}

// --gpu: one agent per job on a shared node samples only its GPUs, named by UUID or index.
TEST(GpuCollector, OnlyTheSelectedGpusAreSampled) {
  GpuCollectorOptions options = withPcie();
  options.only = {"GPU-1111", "7"};
  auto h = make(
      [](FakeGpuDriver& f) {
        FakeGpuDriver::Gpu second;
        second.info = {1, "GPU-1111", "Fake H100", {}};
        f.gpus.push_back(second);
      },
      options);
  ASSERT_EQ(h.collector->gpus().size(), 1u);
  EXPECT_EQ(h.collector->gpus()[0].uuid, "GPU-1111");
  SampleBatch first;
  const auto r = h.collector->collect({}, first);
  EXPECT_NE(r.notice.find("no GPU 7 on this host"), std::string::npos) << r.notice;
  ASSERT_EQ(first.gpus.size(), 1u);
  EXPECT_EQ(first.gpus[0].gpu_index, 1u);
  std::vector<std::string> unmatched;
  const auto both = selectGpus(h.fake->devices().value, {"0", "GPU-1111", "1"}, &unmatched);
  EXPECT_EQ(both.size(), 2u);  // index 1 and GPU-1111 are the same GPU: once
  EXPECT_TRUE(unmatched.empty());
}

TEST(NvmlDriver, MissingLibraryIsReportedAsNoDriver) {
  auto driver = makeNvmlDriver("libnvidia-ml-does-not-exist.so.1");
  const auto r = driver->init();
  EXPECT_EQ(r.code, DriverCode::kNotSupported);
  EXPECT_NE(r.message.find("libnvidia-ml-does-not-exist.so.1"), std::string::npos);
}

}  // namespace
}  // namespace stallwatch::collectors
