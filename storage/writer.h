// The single writer thread. Sampling hands batches over with submit(), which never waits on
// the database: the disk holding the DB may be the one that is stalling. The queue is
// bounded; when the writer falls behind, the oldest batches are dropped and counted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/drop_oldest_queue.h"
#include "storage/store.h"

namespace stallwatch::storage {

struct WriterStats {
  uint64_t written_batches = 0;
  uint64_t dropped_batches = 0;
  uint64_t failed_writes = 0;  // transactions that failed and were retried
  uint64_t pruned_rows = 0;    // deleted by retention
  size_t queue_depth = 0;
};

class SampleWriter {
 public:
  // CAPACITY is in batches (intervals): 600 holds ten minutes at one-second sampling.
  // FLUSH_INTERVAL groups what arrives within it into one transaction: a commit costs far
  // more than its rows, and a crash loses at most this much. Zero writes each batch at once.
  SampleWriter(std::unique_ptr<Store> store, int64_t run_id, size_t capacity = 600,
               std::chrono::milliseconds flush_interval = std::chrono::milliseconds(0));
  // Keep RETAIN of history: older rows are pruned at start and every hour (zero: keep all).
  void setRetention(std::chrono::milliseconds retain);
  // A write that finds the DB damaged (SQLITE_CORRUPT: a page overwritten under it) calls
  // REOPEN, with the error, for a new store and run to write into: the recorder moves the file
  // aside and starts a new one, as it does with a damaged file at start. What was queued is
  // written there. Without it, such writes are retried like any other failure.
  using Reopen = std::function<std::pair<std::unique_ptr<Store>, int64_t>(const std::string& why)>;
  void onCorruption(Reopen reopen) { reopen_ = std::move(reopen); }
  ~SampleWriter();
  SampleWriter(const SampleWriter&) = delete;
  SampleWriter& operator=(const SampleWriter&) = delete;

  void submit(collectors::SampleBatch batch);
  // The device tree: the newest replaces any not yet written. (GPUs are described in a batch.)
  void submitDevices(collectors::DeviceTree tree, int64_t seen_ms);
  void submitEvent(AgentEvent event);
  void submitIncidentEvent(LiveIncidentEvent event);
  void submitHealth(HealthRecord record);

  // Writes everything still queued, closes the run and stops the thread. Returns false if
  // the final writes failed (the data that could not be written is counted as dropped).
  bool finish(int64_t ended_ms);

  WriterStats stats() const;

 private:
  void run();
  template <typename Push>
  void enqueue(Push push);
  bool wantsWaking() const;
  bool halfFull() const;
  bool writePending(std::unique_lock<std::mutex>& lock);
  std::string replaceCorrupt(const std::string& why);

  std::unique_ptr<Store> store_;
  int64_t run_id_;  // changes only when a corrupt DB is replaced (writer thread, or finish())
  Reopen reopen_;
  bool just_replaced_ = false;  // the last write failed on a corrupt DB that was replaced
  const std::chrono::milliseconds flush_interval_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  common::DropOldestQueue<collectors::SampleBatch> batches_;
  common::DropOldestQueue<AgentEvent> events_;
  common::DropOldestQueue<LiveIncidentEvent> incident_events_;
  common::DropOldestQueue<HealthRecord> health_;
  std::optional<std::pair<collectors::DeviceTree, int64_t>> devices_;
  bool stopping_ = false;
  // What the writer thread waits for, if anything: submit() wakes it only when that has come.
  enum class Waiting { kNot, kForWork, kForFlush } waiting_ = Waiting::kNot;
  std::chrono::steady_clock::time_point
      flush_due_;  // while kForFlush: from when a submission wakes it
  WriterStats stats_;
  // A run of failed writes (disk full, DB locked, the DB's disk hung): recorded as one event
  // when writes succeed again, with how many intervals were dropped meanwhile.
  std::optional<int64_t> failing_since_ms_;
  uint64_t failed_attempts_ = 0;
  uint64_t dropped_before_failing_ = 0;
  std::string last_error_;
  std::chrono::milliseconds retain_{0};
  std::chrono::steady_clock::time_point next_prune_{};
  void pruneIfDue();
  std::thread thread_;
};

}  // namespace stallwatch::storage
