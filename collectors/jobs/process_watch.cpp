#include "collectors/jobs/process_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

std::atomic<size_t> g_held{0};

// A thread's stat is about 300 bytes, its schedstat 30, its wchan a symbol name.
constexpr size_t kThreadFileBytes = 1024;

void closeHeld(int& fd) {
  if (fd < 0) return;
  ::close(fd);
  fd = -1;
  g_held.fetch_sub(1, std::memory_order_relaxed);
}

// "RUN_NS WAIT_NS TIMESLICES" (Documentation/scheduler/sched-stats.rst, /proc/PID/schedstat).
std::optional<std::pair<uint64_t, uint64_t>> parseSchedstat(std::string_view text) {
  std::string_view f[4];
  if (splitFields(text.substr(0, text.find('\n')), f) != 3) return std::nullopt;
  const auto run = parseUnsigned(f[0]), wait = parseUnsigned(f[1]);
  if (!run || !wait) return std::nullopt;
  return std::make_pair(*run, *wait);
}

}  // namespace

size_t ProcessWatch::heldDescriptors() { return g_held.load(std::memory_order_relaxed); }

// Half the open-file limit as it is when first asked (the agent raises its soft limit to the
// hard one at start): the rest is for the DB, sockets, sysfs and the other collectors.
size_t ProcessWatch::descriptorBudget() {
  static const size_t budget = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 512ul;
    return static_cast<size_t>(limit.rlim_cur / 2);
  }();
  return budget;
}

ProcessWatch::ProcessWatch(std::filesystem::path dir, uint32_t idle_check_every)
    : dir_(std::move(dir)),
      stat_(dir_ / "stat", ProcFile::Shape::kOneRecord),
      io_(dir_ / "io", ProcFile::Shape::kOneRecord),
      children_(dir_ / "task" / dir_.filename() / "children"),
      idle_check_every_(std::max(1u, idle_check_every)),
      main_tid_(dir_.filename().string()) {
  task_fd_ = ::open((dir_ / "task").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct statfs fs {};
  procfs_ = task_fd_ >= 0 && ::fstatfs(task_fd_, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

ProcessWatch::~ProcessWatch() {
  for (auto& [tid, t] : threads_) closeThread(t);
  if (task_fd_ >= 0) ::close(task_fd_);
}

std::optional<ProcStat> ProcessWatch::stat() {
  std::string error;
  auto parsed = stat_.read(text_, error) ? parseProcStat(text_) : std::nullopt;
  main_state_ = parsed ? parsed->state : '?';
  return parsed;
}

std::optional<ProcIo> ProcessWatch::io() {
  std::string error;
  return io_.read(text_, error) ? parseProcIo(text_) : std::nullopt;
}

std::vector<uint32_t> ProcessWatch::children() {
  std::string error;
  return children_.read(text_, error) ? parsePidList(text_) : std::vector<uint32_t>{};
}

std::vector<uint32_t> ProcessWatch::childrenOfThreads() {
  if (threads_.empty()) rescanThreads();
  std::vector<uint32_t> out;
  for (auto& [tid, t] : threads_) {
    if (!t.ran_since_children || tid == main_tid_) continue;  // children() reads its list
    t.ran_since_children = false;
    // The whole list, however long (a launcher thread's): read to the end, no descriptor kept.
    const std::string path = tid + "/children";
    const int fd = ::openat(task_fd_, path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    text_.clear();
    char chunk[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, chunk, sizeof chunk)) > 0) text_.append(chunk, static_cast<size_t>(n));
    ::close(fd);
    for (uint32_t child : parsePidList(text_)) out.push_back(child);
  }
  return out;
}

void ProcessWatch::closeThread(Thread& t) {
  closeHeld(t.schedstat_fd);
  closeHeld(t.stat_fd);
}

bool ProcessWatch::readThreadFile(const std::string& tid, const char* name, int* held,
                                  std::string& buffer) {
  char text[kThreadFileBytes];  // not BUFFER resized: that would zero-fill it at every read
  if (held && *held >= 0) {
    const ssize_t n = ::pread(*held, text, sizeof text - 1, 0);
    if (n > 0) {
      buffer.assign(text, static_cast<size_t>(n));
      return true;
    }
    closeHeld(*held);  // the thread has exited (ESRCH)
    return false;
  }
  const std::string path = tid + "/" + name;
  const int opened = ::openat(task_fd_, path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) return false;
  const ssize_t n = ::pread(opened, text, sizeof text - 1, 0);
  if (held && procfs_ && n > 0 && g_held.load(std::memory_order_relaxed) < descriptorBudget()) {
    *held = opened;
    g_held.fetch_add(1, std::memory_order_relaxed);
  } else {
    ::close(opened);
  }
  if (n <= 0) return false;
  buffer.assign(text, static_cast<size_t>(n));
  return true;
}

std::string ProcessWatch::readWchan(const std::string& tid) {
  if (!readThreadFile(tid, "wchan", nullptr, buffer_)) return {};  // no descriptor held for it
  while (!buffer_.empty() && (buffer_.back() == '\n' || buffer_.back() == ' ')) buffer_.pop_back();
  return buffer_ == "0" ? std::string() : buffer_;
}

void ProcessWatch::rescanThreads() {
  rescan_ = false;
  if (task_fd_ < 0) return;
  const int dup_fd = ::dup(task_fd_);
  DIR* entries = dup_fd >= 0 ? ::fdopendir(dup_fd) : nullptr;
  if (!entries) {
    if (dup_fd >= 0) ::close(dup_fd);
    return;
  }
  ::rewinddir(entries);  // a dup shares the offset, left at the end by the last scan
  std::map<std::string, Thread> now;
  while (const dirent* e = ::readdir(entries)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string tid = e->d_name;
    if (auto old = threads_.find(tid); old != threads_.end()) {
      now.emplace(tid, std::move(old->second));
      threads_.erase(old);
    } else {
      Thread t;
      t.stagger = static_cast<uint32_t>(std::strtoul(tid.c_str(), nullptr, 10));
      now.emplace(tid, std::move(t));
    }
  }
  ::closedir(entries);
  for (auto& [tid, t] : threads_) closeThread(t);  // the threads that have exited
  threads_ = std::move(now);
}

ThreadStates ProcessWatch::threadStates(uint32_t num_threads) {
  if (rescan_ || num_threads != threads_.size()) rescanThreads();
  ++ticks_;
  ThreadStates out;
  for (auto& [tid, t] : threads_) {
    // A thread in D is looked at every tick, however long it waits: the end of a wait is news.
    const bool idle = t.idle_checks >= kIdleAfterChecks && t.state != 'D' && tid != main_tid_;
    if (idle && (ticks_ + t.stagger) % idle_check_every_ != 0) continue;
    // A thread that keeps running is taken to have run: its stat is read without asking its
    // schedstat first, which is asked only on its verification ticks. (Not the main thread:
    // its state comes with the process's stat, and its sleep is told by its schedstat.)
    const bool hot =
        t.runs >= kHotAfterRuns && tid != main_tid_ && (ticks_ + t.stagger) % kHotVerifyEvery != 0;
    // Whether it ran since the last read: its run time, wait time and timeslice count.
    // Without schedstat (a fixture, a kernel without schedstats: "0 0 0"), every tick reads
    // the stat. A hot thread's schedstat kept is from its last verification, so one that has
    // stopped since is found at the verification after next.
    bool ran = true;
    if (!hot) {
      ++reads_.schedstat;
      if (readThreadFile(tid, "schedstat", &t.schedstat_fd, buffer_) && buffer_.rfind("0 0 0", 0)) {
        ran = buffer_ != t.schedstat;
        if (ran) t.schedstat = buffer_;
      } else {
        t.schedstat.clear();
      }
    }
    t.idle_checks = ran ? 0 : t.idle_checks + 1;
    t.runs = ran ? t.runs + 1 : 0;
    if (ran) {
      t.sleep_wchan.clear();
    } else if (tid == main_tid_ && t.state == 'S' && t.idle_checks >= kSleepingAfterChecks &&
               t.sleep_wchan.empty()) {
      t.sleep_wchan = readWchan(tid);  // asleep since before the last tick: holds until it runs
    }
    if (tid == main_tid_) {
      out.main_sleep_wchan = t.sleep_wchan;
      if (const auto times = parseSchedstat(t.schedstat)) {
        out.main_run_ns = times->first;
        out.main_wait_ns = times->second;
      }
    }
    t.ran_since_children = t.ran_since_children || ran;
    if (ran) {
      if (tid == main_tid_ && main_state_ != '?') {
        // The process's stat, read just before, carries the main thread's state: not read twice.
        t.state = main_state_;
      } else {
        ++reads_.stat;
        if (!readThreadFile(tid, "stat", &t.stat_fd, buffer_)) {
          rescan_ = true;  // gone: the next tick lists the threads again
          t.state = '?';
          continue;
        }
        // comm may hold spaces and parentheses: the state is the first field after the last ')'.
        const size_t close_paren = buffer_.rfind(')');
        t.state = close_paren != std::string::npos && close_paren + 2 < buffer_.size()
                      ? buffer_[close_paren + 2]
                      : '?';
      }
      // A D thread's wchan is read once per sleep; its schedstat decides the ticks after.
      t.wchan = t.state == 'D' ? readWchan(tid) : std::string();
      if (t.state == 'D') t.runs = 0;
    }
    if (t.state != 'D') continue;
    ++out.d_state;
    if (!t.wchan.empty()) out.wchans.push_back(t.wchan);
  }
  main_state_ = '?';  // taken for this tick only
  return out;
}

}  // namespace stallwatch::collectors
