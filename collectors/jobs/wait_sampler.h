// Where a training loop's main thread waits, sampled several times a second: the input-wait
// share of a job that does not report through the dataloader hook (issue 31).
//
// A PyTorch loop waiting for its next batch sleeps in the DataLoader's result queue: poll on the
// workers' pipes (poll_schedule_timeout, do_select), then recvmsg of the batch's shared-memory
// descriptors (unix_stream_read_generic). Waiting for its GPU it sleeps in a futex (CUDA's
// synchronisation) or runs (spinning). Measured on an H100 (docs/MEASUREMENTS.md): a GPU-bound
// ResNet-50 was running in 64 % of 200 samples and in a futex in 35 %, never in poll; with two
// workers short of its pace, in poll 40 % and in unix_stream_read_generic 10 % against the
// 53 % its own step log waited. With pin_memory the loop waits on the pinning thread's queue,
// a futex too: that thread ("pt_data_pin") is noted, and the wait is then given as a range.
//
// Samples come at random gaps averaging 1/HZ (a fixed rate phase-locks with a loop of about
// the same period). Each sample is one pread of /proc/PID/task/PID/wchan (held open), ~1.5 us: at
// 10 Hz and eight ranks, 0.1 ms of CPU a second. The thread touches procfs only, never a disk.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace stallwatch::collectors {

// What a sleeping main thread's wait channel says it waits for.
enum class MainWait { kRunning, kLoader, kFutex, kOther };
MainWait classifyMainWait(std::string_view wchan);  // "" or "0": running (or runnable)

// A thread's samples since they were last taken.
struct WaitCounts {
  uint32_t samples = 0, running = 0, loader = 0, futex = 0, other = 0;
  void add(MainWait w);
  void merge(const WaitCounts& o);
};

class MainThreadSampler {
 public:
  // PROC: the proc root. HZ samples a second; 0 samples only when asked (tests).
  MainThreadSampler(std::filesystem::path proc, double hz);
  ~MainThreadSampler();
  MainThreadSampler(const MainThreadSampler&) = delete;
  MainThreadSampler& operator=(const MainThreadSampler&) = delete;

  // The main threads to sample from now on (their processes' pids); others are forgotten.
  void follow(const std::vector<uint32_t>& pids);
  // Each followed thread's counts since the last take, and starts them again.
  std::map<uint32_t, WaitCounts> take();
  // Samples HZ times a second from the next gap on (the thread's rate; 0 at construction
  // keeps the thread off for good).
  void setRate(double hz) { hz_.store(hz, std::memory_order_relaxed); }
  double rate() const { return hz_.load(std::memory_order_relaxed); }
  // How many times its thread has woken to sample (none while nothing is followed).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }
  // One round over every followed thread now (the thread's own step; tests call it directly).
  void sampleOnce();
  bool running() const { return thread_.joinable(); }

 private:
  struct Target {
    int fd = -1;
    WaitCounts counts;
  };
  void loop();

  std::filesystem::path proc_;
  std::mutex mutex_;
  std::map<uint32_t, Target> targets_;
  std::atomic<double> hz_{0};
  std::atomic<uint64_t> rounds_{0};
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
  std::string buffer_;
};

}  // namespace stallwatch::collectors
