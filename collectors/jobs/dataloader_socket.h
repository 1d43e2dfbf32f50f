// The agent's end of the dataloader socket: a Unix datagram socket that training processes
// send StatsD lines to (the stallwatch Python package, or anything that speaks StatsD). A
// thread of its own receives; the kernel tells us each sender's pid (SO_PASSCRED), which is
// how a datagram is attributed to a job. Memory is bounded whatever arrives: datagrams over
// kMaxDatagramBytes and senders past max_senders are dropped and counted.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectors/jobs/statsd.h"

namespace stallwatch::collectors {

inline constexpr size_t kMaxDatagramBytes = 8192;

struct DataloaderTotals {
  uint64_t steps = 0;
  uint64_t samples = 0;
  double wait_seconds = 0;  // time the loop waited for its next batch
  double step_seconds = 0;  // time spent in the step itself
};

// What one metric may say: a count per report, a timer in ms per report. A sender reports
// every 0.1 s; these are far beyond any real loop, and anything past them is a bad sender.
inline constexpr double kMaxDataloaderCount = 1e9;
inline constexpr double kMaxDataloaderTimerMs = 3.6e6;  // an hour
// Totals saturate here: well inside SQLite's signed 64-bit INTEGER.
inline constexpr uint64_t kMaxDataloaderTotal = 1'000'000'000'000;

// Adds one datagram's metrics to TOTALS; returns how many metrics it did not use (unknown
// names or types, negative or out-of-range values).
// Names: [stallwatch.]dataloader.{steps|c, samples|c, wait|ms, step|ms}. A datagram with no
// steps counter counts each wait timer as one step (for senders that send a timer per step).
uint64_t accumulateDataloaderMetrics(const std::vector<StatsdMetric>& metrics,
                                     DataloaderTotals& totals);

struct DataloaderSocketStats {
  uint64_t datagrams = 0;
  uint64_t metrics = 0;
  uint64_t malformed_lines = 0;
  uint64_t unknown_metrics = 0;
  uint64_t oversized_datagrams = 0;
  uint64_t dropped_senders = 0;  // datagrams from senders past the cap
};

// Where the socket lives unless told otherwise: /run/stallwatch/dataloader.sock for root,
// $XDG_RUNTIME_DIR/stallwatch/dataloader.sock (or /tmp/stallwatch-<uid>/...) otherwise.
// The Python package looks in the same places (and honours STALLWATCH_SOCKET).
std::filesystem::path defaultDataloaderSocketPath();

class DataloaderSocket {
 public:
  struct Options {
    std::filesystem::path path;
    mode_t mode = 0660;  // owner and group may send; --socket-mode 0666 opens it to all users
    std::optional<gid_t> group;  // the socket's group (--socket-group): who may send, with 0660
    size_t max_senders = 4096;
  };

  // Binds the socket (removing a stale one left by a dead agent; refusing to replace a live
  // one or a file that is not a socket) and starts the receiving thread. The directory it
  // lives in must be the agent's own and writable by no one else, as XDG_RUNTIME_DIR must be:
  // another user who owns it, can write it or made it a symlink could swap the socket for
  // theirs and read every job's reports. Created 0755 when missing.
  static std::unique_ptr<DataloaderSocket> open(const Options& options, std::string& error);
  ~DataloaderSocket();
  DataloaderSocket(const DataloaderSocket&) = delete;
  DataloaderSocket& operator=(const DataloaderSocket&) = delete;

  // What arrived since the last call, per sending pid, the kernel's queue included. Called
  // from one thread.
  std::map<uint32_t, DataloaderTotals> drain();
  DataloaderSocketStats stats() const;
  const std::filesystem::path& path() const { return options_.path; }

 private:
  DataloaderSocket(Options options, int fd, int stop_fd);
  void run();
  void receiveQueued(std::vector<char>& buffer);
  void receive(const char* data, size_t size, uint32_t pid);

  Options options_;
  int fd_;
  int stop_fd_;
  mutable std::mutex mutex_;
  std::map<uint32_t, DataloaderTotals> pending_;
  DataloaderSocketStats stats_;
  int64_t last_warning_ns_ = 0;
  uint64_t suppressed_warnings_ = 0;
  std::vector<char> drain_buffer_ = std::vector<char>(kMaxDatagramBytes + 1);  // drain()'s own
  std::thread thread_;
};

}  // namespace stallwatch::collectors
