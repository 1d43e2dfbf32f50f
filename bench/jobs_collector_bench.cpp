// The jobs collector's cost per tick on a job shaped like a real data-parallel run: RANKS rank
// processes of THREADS threads each (a PyTorch rank runs about a hundred: CUDA, NCCL, OpenMP,
// pin-memory; most sleep, some wake every few milliseconds), each with WORKERS DataLoader-like
// children of 4 threads that read a file and compute; each rank holds 200 descriptors, which its
// workers inherit. The tree is forked here; the collector
// follows it from the ranks' pids as `stallwatch record --pid` would.
// Prints the wall and CPU time of each collection, median and p99, for plain ticks and for
// discovery ticks (every 5th, which also walks /proc and the open files).
// IDLE_EVERY: how often threads idle for ten ticks are looked at (1: every tick, as every thread
// was before; 5: the default).
// OPEN_FILES: descriptors looked at per discovery tick (0: none; what their share of it is).
// TICK_MS: the tick period (1000; shorter runs many ticks in little time: the collector counts
// ticks, and the job's threads wake every 10 or 50 ms either way).
// WARMUP: ticks reported apart from the rest. Every member's open files are read once at first,
// within the budget (8 x 8: about 140 ticks); what follows is the steady state.
// Run: build/bench/jobs_collector_bench [RANKS=8] [WORKERS=8] [THREADS=100] [TICKS=60]
// [IDLE_EVERY=5] [OPEN_FILES=512] [TICK_MS=1000] [WARMUP=0]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/devices/block_devices.h"
#include "collectors/devices/device_identity.h"
#include "collectors/jobs/jobs.h"
#include "collectors/system_root.h"

namespace {

using namespace stallwatch::collectors;
using Clock = std::chrono::steady_clock;
constexpr int kRankDescriptors = 200;

void burn(std::chrono::microseconds how_long) {
  const auto until = Clock::now() + how_long;
  volatile uint64_t x = 0;
  while (Clock::now() < until) x = x + 1;
}

// A DataLoader worker: reads 64 KiB of a file, decodes for 0.5 ms, sleeps 50 ms; three helper
// threads that sleep. (Light enough that 8 x 8 of them fit on a 2-core host: the figure is the
// collector's CPU, and its wall time only where the host has cores to spare.)
[[noreturn]] void worker(const char* file) {
  std::mutex m;
  std::condition_variable never;
  for (int i = 0; i < 3; ++i) {
    std::thread([&] {
      std::unique_lock lock(m);
      never.wait(lock, [] { return false; });
    }).detach();
  }
  const int fd = ::open(file, O_RDONLY);
  std::vector<char> buffer(64 << 10);
  for (off_t at = 0;; at = (at + 65536) % (16 << 20)) {
    if (fd >= 0 && ::pread(fd, buffer.data(), buffer.size(), at) < 0) break;
    burn(std::chrono::microseconds(500));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::_Exit(0);
}

// A rank: forks its workers first (fork from a threaded process copies one thread), then
// starts THREADS - 1 threads: a sixth poll every 10 ms (NCCL's proxy, CUDA's), the rest wait.
[[noreturn]] void rank(int workers, int threads, const char* file) {
  // A CUDA rank holds a couple of hundred descriptors (/dev/nvidia*, NCCL's sockets and shared
  // memory, pipes), and its forked workers inherit them: the open-file scan reads them all.
  for (int i = 0; i < kRankDescriptors; ++i) ::open("/dev/null", O_RDONLY);
  for (int w = 0; w < workers; ++w) {
    if (::fork() == 0) worker(file);
  }
  std::mutex m;
  std::condition_variable never;
  for (int i = 1; i < threads; ++i) {
    if (i % 6 == 0) {
      std::thread([] {
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }).detach();
    } else {
      std::thread([&] {
        std::unique_lock lock(m);
        never.wait(lock, [] { return false; });
      }).detach();
    }
  }
  for (;;) {
    burn(std::chrono::microseconds(2000));  // the training step's CPU side
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

double threadCpuMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--rank")
    rank(std::atoi(argv[2]), std::atoi(argv[3]), argv[4]);
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  const int workers = argc > 2 ? std::atoi(argv[2]) : 8;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 100;
  const int ticks = argc > 4 ? std::atoi(argv[4]) : 60;
  const int idle_every = argc > 5 ? std::atoi(argv[5]) : 5;
  const int open_files = argc > 6 ? std::atoi(argv[6]) : 512;
  const int tick_ms = argc > 7 ? std::atoi(argv[7]) : 1000;
  const int warmup = argc > 8 ? std::atoi(argv[8]) : 0;
  char file[] = "/tmp/stallwatch-jobs-bench-XXXXXX";
  const int fd = ::mkstemp(file);
  if (fd < 0 || ::ftruncate(fd, 16 << 20) != 0) {
    std::perror("scratch file");
    return 1;
  }
  ::close(fd);

  JobTrackerOptions options;
  options.follow_gpu_processes = false;
  options.listen_dataloader = false;
  options.idle_thread_check_every = static_cast<uint32_t>(idle_every);
  options.open_files_per_discovery = static_cast<size_t>(open_files);
  std::vector<pid_t> children;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Exec'd, so that /proc/PID/environ holds the run id and the rank, as under torchrun.
      ::setpgid(0, 0);
      const std::string rank_env = "RANK=" + std::to_string(r);
      const std::string w = std::to_string(workers), t = std::to_string(threads);
      const char* libraries = std::getenv("LD_LIBRARY_PATH");  // a carried build needs it
      const std::string libraries_env =
          std::string("LD_LIBRARY_PATH=") + (libraries ? libraries : "");
      char* const env[] = {const_cast<char*>("TORCHELASTIC_RUN_ID=jobs-bench"),
                           const_cast<char*>(rank_env.c_str()),
                           const_cast<char*>(libraries_env.c_str()), nullptr};
      char* const args[] = {argv[0],
                            const_cast<char*>("--rank"),
                            const_cast<char*>(w.c_str()),
                            const_cast<char*>(t.c_str()),
                            file,
                            nullptr};
      ::execve("/proc/self/exe", args, env);
      std::_Exit(127);
    }
    children.push_back(pid);
    options.pids.push_back(static_cast<uint32_t>(pid));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every thread and worker started

  JobTracker tracker(SystemRoot{}, options, nullptr);
  const SystemRoot root;
  auto udev = makeUdevSourceFor(root);
  tracker.setDeviceTree(std::make_shared<const DeviceTree>(scanBlockDevices(root, *udev)));
  // [0]: the warm-up ticks, [1]: the rest.
  std::vector<double> wall_plain[2], cpu_plain[2], wall_discovery[2], cpu_discovery[2];
  size_t processes = 0;
  for (int i = 0; i <= ticks; ++i) {
    SampleBatch out;
    const auto now = Clock::now();
    const Tick tick{
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count()};
    const double cpu0 = threadCpuMs();
    tracker.collect(tick, out);
    const double cpu = threadCpuMs() - cpu0;
    const double wall = std::chrono::duration<double, std::milli>(Clock::now() - now).count();
    if (!out.jobs.empty()) processes = out.jobs.front().processes;
    if (i > 0) {  // the first collection only primes the counters and finds the tree
      const int part = i <= warmup ? 0 : 1;
      ((i % 5 == 0) ? wall_discovery : wall_plain)[part].push_back(wall);
      ((i % 5 == 0) ? cpu_discovery : cpu_plain)[part].push_back(cpu);
    }
    std::this_thread::sleep_until(now + std::chrono::milliseconds(tick_ms));
  }
  for (pid_t pid : children) ::kill(-pid, SIGKILL);
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  ::unlink(file);

  std::printf(
      "%d ranks x %d workers, %d threads a rank: %zu processes followed, %d ticks of %d ms\n",
      ranks, workers, threads, processes, ticks, tick_ms);
  for (int part : {0, 1}) {
    if (cpu_plain[part].empty() && cpu_discovery[part].empty()) continue;
    if (warmup > 0) {
      std::printf(part == 0 ? "ticks 1-%d (first reads of every member's files):\n"
                            : "ticks after %d (steady state):\n",
                  warmup);
    }
    std::printf(
        "plain ticks:     wall median %.3f ms p99 %.3f ms; CPU median %.3f ms p99 %.3f ms\n",
        percentile(wall_plain[part], 0.5), percentile(wall_plain[part], 0.99),
        percentile(cpu_plain[part], 0.5), percentile(cpu_plain[part], 0.99));
    std::printf(
        "discovery ticks: wall median %.3f ms p99 %.3f ms; CPU median %.3f ms p99 %.3f ms\n",
        percentile(wall_discovery[part], 0.5), percentile(wall_discovery[part], 0.99),
        percentile(cpu_discovery[part], 0.5), percentile(cpu_discovery[part], 0.99));
    double sum = 0;
    for (double v : cpu_plain[part]) sum += v;
    for (double v : cpu_discovery[part]) sum += v;
    const size_t n = cpu_plain[part].size() + cpu_discovery[part].size();
    std::printf(
        "every tick:      CPU mean %.3f ms; (4 x plain + discovery) / 5 of the medians %.3f ms\n",
        n ? sum / static_cast<double>(n) : 0.0,
        (4 * percentile(cpu_plain[part], 0.5) + percentile(cpu_discovery[part], 0.5)) / 5);
  }
  return 0;
}
