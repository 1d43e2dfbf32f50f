// Cost of one collection cycle on this host, and of merely reading its source files.
// Run: build/bench/collect_cycle_bench  (figures are CPU time per cycle)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "collectors/counter_rates.h"
#include "collectors/devices/block_devices.h"
#include "collectors/devices/diskstats.h"
#include "collectors/devices/mountstats.h"
#include "collectors/host/pressure.h"
#include "collectors/jobs/process_watch.h"
#include "collectors/proc_file.h"
#include "collectors/self_process.h"

namespace {

using namespace stallwatch::collectors;

constexpr std::array<const char*, 4> kSources = {"/proc/diskstats", "/proc/pressure/io",
                                                 "/proc/pressure/cpu", "/proc/pressure/memory"};

// What node_exporter does per scrape: open, read, close each file.
void BM_ReadSourcesOpenReadClose(benchmark::State& state) {
  char buffer[16384];
  for (auto _ : state) {
    for (const char* path : kSources) {
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      ssize_t n = 0;
      while ((n = ::read(fd, buffer, sizeof buffer)) > 0) benchmark::DoNotOptimize(n);
      ::close(fd);
    }
  }
}
BENCHMARK(BM_ReadSourcesOpenReadClose);

// What the collectors do: descriptors kept open, pread from offset 0.
void BM_ReadSourcesPread(benchmark::State& state) {
  std::vector<ProcFile> files;
  for (const char* path : kSources) files.emplace_back(path);
  std::string content;
  std::string error;
  for (auto _ : state) {
    for (auto& f : files) {
      f.read(content, error);
      benchmark::DoNotOptimize(content.data());
    }
  }
}
BENCHMARK(BM_ReadSourcesPread);

void BM_ParseDiskstats(benchmark::State& state) {
  const auto text = readTextFile("/proc/diskstats").value_or("");
  for (auto _ : state) benchmark::DoNotOptimize(parseDiskstats(text));
  state.counters["devices"] = static_cast<double>(parseDiskstats(text).devices.size());
}
BENCHMARK(BM_ParseDiskstats);

// One full cycle of the two collectors the recorder runs on every host: read, parse, rates.
void BM_DiskstatsAndPressureCycle(benchmark::State& state) {
  const SystemRoot root;
  auto disks = makeDiskstatsCollector(root);
  auto pressure = makePressureCollector(root);
  int64_t ns = 0;
  for (auto _ : state) {
    ns += 1'000'000'000;
    SampleBatch batch;
    disks->collect({ns, 0}, batch);
    pressure->collect({ns, 0}, batch);
    benchmark::DoNotOptimize(batch.disks.data());
  }
}
BENCHMARK(BM_DiskstatsAndPressureCycle);

}  // namespace

namespace {

// The same cycle as the agent runs it: once in a while, with caches gone cold in between.
// The pause (100 ms, untimed) lets the rest of the system evict our code and data.
void BM_DiskstatsAndPressureCycleCold(benchmark::State& state) {
  const SystemRoot root;
  auto disks = makeDiskstatsCollector(root);
  auto pressure = makePressureCollector(root);
  const bool read_only = state.range(0) == 1;
  std::vector<ProcFile> files;
  for (const char* path : kSources) files.emplace_back(path);
  std::string content;
  std::string error;
  int64_t ns = 0;
  for (auto _ : state) {
    state.PauseTiming();
    usleep(100'000);
    state.ResumeTiming();
    if (read_only) {
      for (auto& f : files) f.read(content, error);
      continue;
    }
    ns += 1'000'000'000;
    SampleBatch batch;
    disks->collect({ns, 0}, batch);
    pressure->collect({ns, 0}, batch);
    benchmark::DoNotOptimize(batch.disks.data());
  }
}
BENCHMARK(BM_DiskstatsAndPressureCycleCold)->Arg(0)->Arg(1)->Iterations(50)->ArgName("read_only");

}  // namespace

namespace {

// The NFS part of the mounts collector per tick: parse /proc/self/mountstats with ARG NFSv4
// mounts (each with the 59-op table a 6.x kernel prints) and compute every mount's rates.
void BM_MountstatsParseAndRates(benchmark::State& state) {
  std::string text = "device /dev/vda1 mounted on / with fstype ext4\n";
  for (int64_t m = 0; m < state.range(0); ++m) {
    text += "device 10.0.0.5:/export" + std::to_string(m) + " mounted on /data" +
            std::to_string(m) + " with fstype nfs4 statvers=1.1\n\tage:\t1000\n" +
            "\txprt:\ttcp 0 1 2 0 11 6428 6428 0 12154 0 24 26 5726\n\tper-op statistics\n";
    for (int op = 0; op < 59; ++op) {
      text +=
          "\t        OP" + std::to_string(op) + ": 1298 1298 0 207680 1210292152 6 79386 79407 0\n";
    }
  }
  const MountstatsParse previous = parseMountstats(text);
  for (auto _ : state) {
    const MountstatsParse now = parseMountstats(text);
    for (size_t i = 0; i < now.mounts.size(); ++i) {
      benchmark::DoNotOptimize(computeNfsRates(previous.mounts[i], now.mounts[i], 1.0));
    }
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_MountstatsParseAndRates)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);

// A full rescan of the block device tree: sysfs walk, udev identity, mountinfo.
void BM_ScanBlockDevices(benchmark::State& state) {
  const SystemRoot root;
  auto udev = makeUdevSourceFor(root);
  for (auto _ : state) benchmark::DoNotOptimize(scanBlockDevices(root, *udev));
}
BENCHMARK(BM_ScanBlockDevices)->Unit(benchmark::kMicrosecond);

// The jobs collector's per-process thread scan (D-state threads and their wchans), on this
// process with ARG threads besides its main one: a PyTorch rank runs about a hundred. After the
// first tick only the threads that ran are read in full (collectors/jobs/process_watch.h); here
// they wake every 5 ms, so all of them did, as in a busy rank.
void BM_ThreadStates(benchmark::State& state) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < state.range(0); ++i) {
    threads.emplace_back([&] {
      while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  }
  ProcessWatch watch("/proc/" + std::to_string(::getpid()));
  const auto count = static_cast<uint32_t>(state.range(0) + 1);
  for (auto _ : state) benchmark::DoNotOptimize(watch.threadStates(count));
  stop = true;
  for (auto& t : threads) t.join();
}
BENCHMARK(BM_ThreadStates)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);

// The agent's own process figures, read for every rendering of /metrics (process_*): its stat,
// its open descriptors counted, its limits and /proc/stat's boot time. Once (everything opened
// and read afresh, as each scrape did before issue 47) and by the reader the server keeps.
void BM_ReadSelfProcessOnce(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(readSelfProcess());
}
BENCHMARK(BM_ReadSelfProcessOnce)->Unit(benchmark::kMicrosecond);

void BM_ReadSelfProcessKept(benchmark::State& state) {
  SelfProcessReader reader;
  for (auto _ : state) benchmark::DoNotOptimize(reader.read());
}
BENCHMARK(BM_ReadSelfProcessKept)->Unit(benchmark::kMicrosecond);

}  // namespace
BENCHMARK_MAIN();
