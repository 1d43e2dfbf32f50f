// Runs the operator's program for each incident event, like smartd's `-M exec`, without ever
// holding up sampling: submit() queues and returns; a thread of its own starts the program
// directly (posix_spawn, no shell), with a fixed environment (PATH plus STALLWATCH_*), the
// event as JSON on standard input, in a process group of its own. A hook still running at
// its timeout is killed with its group. At most max_concurrent run at once; beyond
// queue_capacity waiting events the oldest is dropped. Every outcome is counted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/drop_oldest_queue.h"

namespace stallwatch::agent {

struct HookConfig {
  std::vector<std::string> argv;  // program and its arguments
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  size_t max_concurrent = 4;
  size_t queue_capacity = 64;
};

struct HookStats {
  uint64_t started = 0;
  uint64_t succeeded = 0;     // exit status 0
  uint64_t failed = 0;        // other exit status, or killed by a signal not ours
  uint64_t timed_out = 0;     // killed at the timeout
  uint64_t spawn_errors = 0;  // could not start (missing, not executable)
  uint64_t dropped = 0;       // queue full: oldest waiting event dropped
  size_t running = 0;
  size_t queued = 0;
};

class HookRunner {
 public:
  explicit HookRunner(HookConfig config);
  ~HookRunner();  // stop(timeout), where stop was not called
  // Takes no more events; what runs and waits gets until MAX, after which the hooks still
  // running are killed with their process trees. Returns when none is left.
  void stop(std::chrono::milliseconds max);
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  void submit(std::string stdin_json, std::vector<std::pair<std::string, std::string>> environment);
  HookStats stats() const;
  // Waits until nothing is queued or running, at most MAX; true if idle.
  bool waitIdle(std::chrono::milliseconds max);

 private:
  struct Pending {
    std::string input;
    std::vector<std::pair<std::string, std::string>> environment;
  };
  struct Running {
    pid_t pid;
    std::chrono::steady_clock::time_point deadline;
    bool killed = false;
  };
  void run();
  void start(Pending p);
  void reap();

  const HookConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  common::DropOldestQueue<Pending> queue_;
  std::vector<Running> running_;
  HookStats stats_;
  bool stopping_ = false;
  std::chrono::milliseconds stop_within_{0};  // set with stopping_
  std::thread thread_;
};

}  // namespace stallwatch::agent
