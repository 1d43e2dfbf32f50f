#include "health/smartctl_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/spawn.h"
#include "health/smartctl_json.h"

namespace stallwatch::health {
namespace {

constexpr size_t kMaxOutput = 4 << 20;

}  // namespace

ProgramOutput runProgram(const std::vector<std::string>& argv_in,
                         std::chrono::milliseconds timeout) {
  ProgramOutput out;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  common::SpawnSpec spec;
  spec.argv = argv_in;
  spec.stdout_fd = fds[1];
  const pid_t pid = common::spawnDirect(spec, out.error);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return out;
  }
  out.started = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;  // the deadline check above ends it
    const ssize_t got = ::read(fds[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: the program closed its output
    if (out.out.size() < kMaxOutput) out.out.append(buffer, static_cast<size_t>(got));
  }
  ::close(fds[0]);
  if (out.timed_out) common::killGroup(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

SmartctlFallbackReader::SmartctlFallbackReader(std::shared_ptr<DriveReader> native,
                                               std::string smartctl,
                                               std::chrono::milliseconds timeout)
    : native_(std::move(native)), smartctl_(std::move(smartctl)), timeout_(timeout) {}

bool SmartctlFallbackReader::read(const DriveTarget& target, DriveReading& reading,
                                  std::string& error) {
  std::string native_error;
  if (native_ && native_->read(target, reading, native_error) &&
      (!reading.ata.empty() || reading.nvme))
    return true;
  if (isPermissionError(native_error)) {
    error = native_error;
    return false;
  }
  const std::string dev = target.kind == DriveKind::kNvme ? target.path : "/dev/" + target.device;
  const ProgramOutput p = runProgram({smartctl_, "--json", "-x", dev}, timeout_);
  if (!p.started) {
    error = p.error;
    return false;
  }
  if (p.timed_out) {
    error =
        smartctl_ + " did not finish within " + std::to_string(timeout_.count()) + " ms; killed";
    return false;
  }
  try {
    const SmartctlParse parsed = parseSmartctlJson(p.out);
    if (parsed.kind == SmartctlOutput::kOpenFailed) {
      error = "smartctl: " + parsed.reading.note;
      return false;
    }
    DriveReading r = parsed.reading;
    r.device = target.device;
    if (r.model.empty()) r.model = target.model;
    if (r.serial.empty()) r.serial = target.serial;
    if (!r.smartctl_exit_status) r.smartctl_exit_status = p.exit_status;
    reading = std::move(r);
    return true;
  } catch (const std::exception& e) {
    error = "smartctl output unreadable (" + std::string(e.what()) + ")" +
            (native_error.empty() ? "" : "; native reader: " + native_error);
    return false;
  }
}

}  // namespace stallwatch::health
