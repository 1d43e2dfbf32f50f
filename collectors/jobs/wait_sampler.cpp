#include "collectors/jobs/wait_sampler.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <random>

namespace stallwatch::collectors {
namespace {

// Kernel functions a thread sleeps in while it waits on a pipe, a socket or a poll set: where
// the DataLoader's result queue has the main thread wait (its workers' pipes, then recvmsg of
// the batch's shared-memory descriptors). Compiler suffixes (".constprop.0", ".isra.0") are
// stripped before the comparison.
constexpr std::array<std::string_view, 9> kLoaderWaits = {"poll_schedule_timeout",
                                                          "do_select",
                                                          "do_sys_poll",
                                                          "core_sys_select",
                                                          "pipe_read",
                                                          "pipe_wait",
                                                          "unix_stream_read_generic",
                                                          "unix_stream_data_wait",
                                                          "do_epoll_wait"};

}  // namespace

MainWait classifyMainWait(std::string_view wchan) {
  while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == ' ')) wchan.remove_suffix(1);
  if (wchan.empty() || wchan == "0") return MainWait::kRunning;
  if (const size_t dot = wchan.find('.'); dot != std::string_view::npos)
    wchan = wchan.substr(0, dot);
  for (std::string_view w : kLoaderWaits) {
    if (wchan == w) return MainWait::kLoader;
  }
  if (wchan.starts_with("futex")) return MainWait::kFutex;
  if (wchan == "ep_poll") return MainWait::kLoader;
  return MainWait::kOther;
}

void WaitCounts::add(MainWait w) {
  ++samples;
  switch (w) {
    case MainWait::kRunning:
      ++running;
      break;
    case MainWait::kLoader:
      ++loader;
      break;
    case MainWait::kFutex:
      ++futex;
      break;
    case MainWait::kOther:
      ++other;
      break;
  }
}

void WaitCounts::merge(const WaitCounts& o) {
  samples += o.samples;
  running += o.running;
  loader += o.loader;
  futex += o.futex;
  other += o.other;
}

MainThreadSampler::MainThreadSampler(std::filesystem::path proc, double hz)
    : proc_(std::move(proc)), hz_(hz) {
  if (hz > 0) thread_ = std::thread([this] { loop(); });
}

MainThreadSampler::~MainThreadSampler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& [pid, t] : targets_) {
    if (t.fd >= 0) ::close(t.fd);
  }
}

void MainThreadSampler::follow(const std::vector<uint32_t>& pids) {
  std::lock_guard lock(mutex_);
  std::map<uint32_t, Target> next;
  for (uint32_t pid : pids) {
    if (auto it = targets_.find(pid); it != targets_.end()) {
      next.emplace(pid, it->second);
      it->second.fd = -1;
      continue;
    }
    const std::string path =
        (proc_ / std::to_string(pid) / "task" / std::to_string(pid) / "wchan").string();
    Target t;
    t.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    next.emplace(pid, t);
  }
  for (auto& [pid, t] : targets_) {
    if (t.fd >= 0) ::close(t.fd);
  }
  const bool woken = targets_.empty() && !next.empty();
  targets_ = std::move(next);
  if (woken) wake_.notify_all();  // the thread sleeps while there is nothing to sample
}

std::map<uint32_t, WaitCounts> MainThreadSampler::take() {
  std::lock_guard lock(mutex_);
  std::map<uint32_t, WaitCounts> out;
  for (auto& [pid, t] : targets_) {
    out[pid] = t.counts;
    t.counts = {};
  }
  return out;
}

void MainThreadSampler::sampleOnce() {
  std::lock_guard lock(mutex_);
  char text[128];
  for (auto& [pid, t] : targets_) {
    if (t.fd < 0) continue;
    const ssize_t n = ::pread(t.fd, text, sizeof text - 1, 0);
    if (n < 0) {  // the thread has exited: nothing more to sample
      ::close(t.fd);
      t.fd = -1;
      continue;
    }
    t.counts.add(classifyMainWait(std::string_view(text, static_cast<size_t>(n))));
  }
}

void MainThreadSampler::loop() {
  pthread_setname_np(pthread_self(), "sw-waits");
  // Each gap drawn uniformly from half to one and a half periods: a fixed rate phase-locks with
  // a loop whose steps take about as long (a 10 Hz sampler saw a 100 ms loop always in the same
  // half of its step: 0 %, then 100 % waiting), a random one samples every phase alike.
  std::minstd_rand random(
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_real_distribution<double> gap(0.5, 1.5);  // periods
  auto next = std::chrono::steady_clock::now();
  std::unique_lock lock(mutex_);
  while (!stop_) {
    // Nothing followed (no job, or a host without GPUs): asleep until follow() gives it a
    // thread to sample, not woken ten times a second for nothing (issue 47: 273 us a second).
    if (targets_.empty()) {
      wake_.wait(lock, [this] { return stop_ || !targets_.empty(); });
      next = std::chrono::steady_clock::now();
      continue;
    }
    const double hz = std::max(0.1, rate());
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(gap(random) / hz));
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind (a suspended VM): no burst to catch up
    if (wake_.wait_until(lock, next, [this] { return stop_; })) break;
    lock.unlock();
    sampleOnce();
    rounds_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
  }
}

}  // namespace stallwatch::collectors
