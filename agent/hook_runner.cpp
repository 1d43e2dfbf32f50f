#include "agent/hook_runner.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/spawn.h"

namespace stallwatch::agent {
namespace {

constexpr auto kReapPoll = std::chrono::milliseconds(20);
}  // namespace

HookRunner::HookRunner(HookConfig config)
    : config_(std::move(config)), queue_(config_.queue_capacity) {
  thread_ = std::thread([this] { run(); });
}

HookRunner::~HookRunner() { stop(config_.timeout); }

void HookRunner::stop(std::chrono::milliseconds max) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    stop_within_ = std::max(max, std::chrono::milliseconds(0));
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HookRunner::submit(std::string stdin_json,
                        std::vector<std::pair<std::string, std::string>> environment) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.push({std::move(stdin_json), std::move(environment)}) > 0) {
      ++stats_.dropped;
      spdlog::warn("hook: {} events waiting; dropped the oldest", config_.queue_capacity);
    }
  }
  wake_.notify_all();
}

HookStats HookRunner::stats() const {
  std::lock_guard lock(mutex_);
  HookStats s = stats_;
  s.running = running_.size();
  s.queued = queue_.size();
  return s;
}

bool HookRunner::waitIdle(std::chrono::milliseconds max) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, max, [&] { return queue_.empty() && running_.empty(); });
}

// Called with mutex_ held; spawning takes well under a millisecond.
void HookRunner::start(Pending p) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ++stats_.spawn_errors;
    spdlog::warn("hook: pipe: {}", std::strerror(errno));
    return;
  }
  common::SpawnSpec spec;
  spec.argv = config_.argv;
  spec.environment = std::move(p.environment);
  spec.stdin_fd = pipe_fds[0];
  spec.inherit_stderr = true;
  std::string error;
  const pid_t pid = common::spawnDirect(spec, error);
  ::close(pipe_fds[0]);
  if (pid < 0) {
    ::close(pipe_fds[1]);
    ++stats_.spawn_errors;
    spdlog::warn("hook: {}", error);
    return;
  }
  // The payload is a few KB, below the pipe's buffer: written at once, never waiting on a
  // hook that does not read. What does not fit is cut, and said.
  ::fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK);
  const ssize_t n = ::write(pipe_fds[1], p.input.data(), p.input.size());
  if (n != static_cast<ssize_t>(p.input.size())) {
    spdlog::warn("hook: only {} of {} bytes of the event went to the hook's standard input",
                 n < 0 ? 0 : n, p.input.size());
  }
  ::close(pipe_fds[1]);
  ++stats_.started;
  running_.push_back({pid, std::chrono::steady_clock::now() + config_.timeout});
}

// Called with mutex_ held.
void HookRunner::reap() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = running_.begin(); it != running_.end();) {
    int status = 0;
    const pid_t r = ::waitpid(it->pid, &status, WNOHANG);
    if (r == it->pid || (r < 0 && errno == ECHILD)) {
      if (it->killed) {
        ++stats_.timed_out;
      } else if (r == it->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        ++stats_.succeeded;
      } else {
        ++stats_.failed;
        spdlog::warn("hook {} (pid {}) {} {}", config_.argv[0], it->pid,
                     WIFEXITED(status) ? "exited with status" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      }
      it = running_.erase(it);
      continue;
    }
    if (!it->killed && now >= it->deadline) {
      spdlog::warn("hook {} (pid {}) still running after {} ms: killed", config_.argv[0], it->pid,
                   config_.timeout.count());
      common::killTree(it->pid);  // its process group and all it started: setsid children too
      it->killed = true;
    }
    ++it;
  }
}

void HookRunner::run() {
  pthread_setname_np(pthread_self(), "sw-hooks");  // per-thread CPU in top -H, the benches
  // A hook that exits before reading its input makes our write fail with EPIPE; the signal
  // that comes with it must not end the agent. Blocked here, it stays pending on this thread.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  std::unique_lock lock(mutex_);
  std::optional<std::chrono::steady_clock::time_point> give_up;
  while (true) {
    while (!queue_.empty() && running_.size() < config_.max_concurrent) {
      start(*queue_.pop());
    }
    reap();
    if (queue_.empty() && running_.empty()) idle_.notify_all();
    if (stopping_) {
      if (queue_.empty() && running_.empty()) break;
      // Stopping: what runs gets until the stop's deadline; what waits still starts within it.
      if (!give_up) give_up = std::chrono::steady_clock::now() + stop_within_;
      if (std::chrono::steady_clock::now() >= *give_up) {
        for (auto& r : running_) {
          if (r.killed) continue;
          common::killTree(r.pid);
          r.killed = true;
        }
        stats_.dropped += queue_.clear();
      }
    }
    if (running_.empty() && queue_.empty() && !stopping_) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    } else {
      wake_.wait_for(lock, kReapPoll);
    }
  }
}

}  // namespace stallwatch::agent
