#include "collectors/jobs/dataloader_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stallwatch::collectors {
namespace {

constexpr int64_t kWarningIntervalNs = 10'000'000'000;  // at most one warning per 10 s

std::string_view withoutPrefix(std::string_view name) {
  constexpr std::string_view kPrefix = "stallwatch.";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  return name;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool fillAddress(const std::filesystem::path& path, sockaddr_un& addr, std::string& error) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  const std::string p = path.string();
  if (p.size() >= sizeof addr.sun_path) {
    error = "socket path " + p + " is longer than " + std::to_string(sizeof addr.sun_path - 1) +
            " bytes";
    return false;
  }
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  return true;
}

}  // namespace

uint64_t accumulateDataloaderMetrics(const std::vector<StatsdMetric>& metrics,
                                     DataloaderTotals& totals) {
  uint64_t unknown = 0;
  bool has_steps = false;
  for (const auto& m : metrics) {
    if (withoutPrefix(m.name) == "dataloader.steps" && m.type == StatsdType::kCounter)
      has_steps = true;
  }
  for (const auto& m : metrics) {
    const std::string_view name = withoutPrefix(m.name);
    const double scaled = m.value / m.sample_rate;
    // Negative counts and durations have no meaning here: unknown, like out-of-range ones.
    const bool count_ok = scaled >= 0 && scaled <= kMaxDataloaderCount;
    const bool timer_ok = m.value >= 0 && m.value <= kMaxDataloaderTimerMs;
    auto add = [](uint64_t& total, double n) {
      total = std::min(kMaxDataloaderTotal, total + static_cast<uint64_t>(std::llround(n)));
    };
    if (name == "dataloader.steps" && m.type == StatsdType::kCounter && count_ok) {
      add(totals.steps, scaled);
    } else if (name == "dataloader.samples" && m.type == StatsdType::kCounter && count_ok) {
      add(totals.samples, scaled);
    } else if (name == "dataloader.wait" && m.type == StatsdType::kTimer && timer_ok) {
      totals.wait_seconds += m.value / 1000.0;
      if (!has_steps) add(totals.steps, 1);
    } else if (name == "dataloader.step" && m.type == StatsdType::kTimer && timer_ok) {
      totals.step_seconds += m.value / 1000.0;
    } else {
      ++unknown;
    }
  }
  return unknown;
}

namespace {

// The socket's directory: a directory (not a symlink to one), owned by this agent's user, and
// writable by no one else.
bool safeDirectory(const std::filesystem::path& dir, std::string& error) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    error = "cannot inspect " + dir.string() + ": " + std::strerror(errno);
    return false;
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (S_ISLNK(st.st_mode)) {
    error = dir.string() + " is a symbolic link; the socket's directory must be a real one";
  } else if (!S_ISDIR(st.st_mode)) {
    error = dir.string() + " is not a directory";
  } else if (st.st_uid != ::geteuid()) {
    error = dir.string() + " belongs to uid " + std::to_string(st.st_uid) +
            ", not to this agent's uid " + std::to_string(::geteuid()) +
            "; another user could replace the socket";
  } else if ((st.st_mode & 022) != 0) {
    error = dir.string() + " is writable by others (mode " + mode +
            "); another user could replace the socket: make it 0755 or 0700";
  } else {
    return true;
  }
  return false;
}

}  // namespace

std::filesystem::path defaultDataloaderSocketPath() {
  if (::geteuid() == 0) return "/run/stallwatch/dataloader.sock";
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR"); runtime && *runtime == '/') {
    return std::filesystem::path(runtime) / "stallwatch" / "dataloader.sock";
  }
  return std::filesystem::path("/tmp") / ("stallwatch-" + std::to_string(::geteuid())) /
         "dataloader.sock";
}

std::unique_ptr<DataloaderSocket> DataloaderSocket::open(const Options& options,
                                                         std::string& error) {
  sockaddr_un addr{};
  if (!fillAddress(options.path, addr, error)) return nullptr;
  std::error_code ec;
  const auto dir = options.path.parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      error = "cannot create " + dir.string() + ": " + ec.message();
      return nullptr;
    }
    ::chmod(dir.c_str(), 0755);  // clients must reach the socket; the socket's mode guards it
  }
  if (!dir.empty() && !safeDirectory(dir, error)) return nullptr;
  struct stat st {};
  if (::lstat(options.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      error = options.path.string() + " exists and is not a socket; not replacing it";
      return nullptr;
    }
    // A socket file: alive if something answers, stale if the agent that made it is gone.
    const int probe = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const bool alive =
        probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (probe >= 0) ::close(probe);
    if (alive) {
      error = "another agent is listening on " + options.path.string();
      return nullptr;
    }
    ::unlink(options.path.c_str());
  }
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  const int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::chmod(options.path.c_str(), options.mode) != 0 ||
      (options.group &&
       ::chown(options.path.c_str(), static_cast<uid_t>(-1), *options.group) != 0)) {
    error = "cannot bind " + options.path.string() + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    error = std::string("eventfd: ") + std::strerror(errno);
    ::close(fd);
    ::unlink(options.path.c_str());
    return nullptr;
  }
  return std::unique_ptr<DataloaderSocket>(new DataloaderSocket(options, fd, stop_fd));
}

DataloaderSocket::DataloaderSocket(Options options, int fd, int stop_fd)
    : options_(std::move(options)), fd_(fd), stop_fd_(stop_fd) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sw-dataloader");
    run();
  });
}

DataloaderSocket::~DataloaderSocket() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  ::close(stop_fd_);
  ::unlink(options_.path.c_str());
}

void DataloaderSocket::run() {
  std::vector<char> buffer(kMaxDatagramBytes + 1);
  pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    if (fds[1].revents) break;
    receiveQueued(buffer);
  }
}

// Everything the kernel holds for us, without waiting. Called by the receiving thread as
// datagrams come, and by drain() so that a datagram sent before the tick is in it even where
// the thread lags (a loaded host): a process that sends its last steps and exits is seen gone
// by that tick, and what it sent would otherwise reach the next tick with no job to go to.
void DataloaderSocket::receiveQueued(std::vector<char>& buffer) {
  // One byte more than accepted, so that MSG_TRUNC marks what is too long.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  while (true) {
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) break;  // EAGAIN: drained
    uint32_t pid = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred{};
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        pid = static_cast<uint32_t>(cred.pid);
      }
    }
    if ((msg.msg_flags & MSG_TRUNC) || static_cast<size_t>(n) > kMaxDatagramBytes) {
      std::lock_guard lock(mutex_);
      ++stats_.datagrams;
      ++stats_.oversized_datagrams;
      continue;
    }
    receive(buffer.data(), static_cast<size_t>(n), pid);
  }
}

void DataloaderSocket::receive(const char* data, size_t size, uint32_t pid) {
  const StatsdParse parsed = parseStatsd(std::string_view(data, size));
  std::lock_guard lock(mutex_);
  ++stats_.datagrams;
  stats_.metrics += parsed.metrics.size();
  stats_.malformed_lines += parsed.skipped.size();
  auto it = pending_.find(pid);
  if (it == pending_.end()) {
    if (pending_.size() >= options_.max_senders) {
      ++stats_.dropped_senders;
      return;
    }
    it = pending_.emplace(pid, DataloaderTotals{}).first;
  }
  stats_.unknown_metrics += accumulateDataloaderMetrics(parsed.metrics, it->second);
  if (!parsed.skipped.empty()) {
    const int64_t now = nowNs();
    if (now - last_warning_ns_ >= kWarningIntervalNs) {
      spdlog::warn(
          "dataloader socket: malformed line from pid {} (line {}: {}); {} more "
          "warnings suppressed since the last one",
          pid, parsed.skipped.front().line, parsed.skipped.front().message, suppressed_warnings_);
      last_warning_ns_ = now;
      suppressed_warnings_ = 0;
    } else {
      ++suppressed_warnings_;
    }
  }
}

std::map<uint32_t, DataloaderTotals> DataloaderSocket::drain() {
  receiveQueued(drain_buffer_);
  std::lock_guard lock(mutex_);
  std::map<uint32_t, DataloaderTotals> out;
  out.swap(pending_);
  return out;
}

DataloaderSocketStats DataloaderSocket::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace stallwatch::collectors
