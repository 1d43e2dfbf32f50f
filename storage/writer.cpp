#include "storage/writer.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <chrono>

namespace stallwatch::storage {
namespace {

constexpr size_t kMaxQueuedEvents = 1000;
constexpr auto kRetryDelay = std::chrono::seconds(1);

}  // namespace

SampleWriter::SampleWriter(std::unique_ptr<Store> store, int64_t run_id, size_t capacity,
                           std::chrono::milliseconds flush_interval)
    : store_(std::move(store)),
      run_id_(run_id),
      flush_interval_(flush_interval),
      batches_(capacity),
      events_(kMaxQueuedEvents),
      incident_events_(kMaxQueuedEvents),
      health_(kMaxQueuedEvents) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sw-writer");
    run();
  });
}

SampleWriter::~SampleWriter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// PUSH runs under the lock; the thread is woken only where it waits for what came.
template <typename Push>
void SampleWriter::enqueue(Push push) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    push();
    wake = wantsWaking();
  }
  if (wake) wake_.notify_one();
}

void SampleWriter::submit(collectors::SampleBatch batch) {
  enqueue([&] { stats_.dropped_batches += batches_.push(std::move(batch)); });
}

void SampleWriter::submitDevices(collectors::DeviceTree tree, int64_t seen_ms) {
  enqueue([&] { devices_.emplace(std::move(tree), seen_ms); });
}

void SampleWriter::submitEvent(AgentEvent event) {
  enqueue([&] { events_.push(std::move(event)); });
}

void SampleWriter::submitIncidentEvent(LiveIncidentEvent event) {
  enqueue([&] { incident_events_.push(std::move(event)); });
}

void SampleWriter::submitHealth(HealthRecord record) {
  enqueue([&] { health_.push(std::move(record)); });
}

WriterStats SampleWriter::stats() const {
  std::lock_guard lock(mutex_);
  WriterStats s = stats_;
  s.queue_depth = batches_.size();
  return s;
}

// Takes what is queued, writes it with the lock released, and puts it back on failure so
// that a full disk or a locked DB costs a retry, not the data (up to the queue's capacity).
bool SampleWriter::writePending(std::unique_lock<std::mutex>& lock) {
  std::deque<collectors::SampleBatch> taken = batches_.takeAll();
  std::vector<collectors::SampleBatch> batches(std::make_move_iterator(taken.begin()),
                                               std::make_move_iterator(taken.end()));
  std::deque<AgentEvent> events = events_.takeAll();
  std::deque<LiveIncidentEvent> incident_events = incident_events_.takeAll();
  std::deque<HealthRecord> health = health_.takeAll();
  auto devices = std::move(devices_);
  devices_.reset();
  lock.unlock();

  bool ok = true;
  bool batches_written = false;
  std::string replaced;  // what replaceCorrupt() did, for the new DB's events
  try {
    if (!store_) throw StoreError("no database open (" + last_error_ + ")");
    if (devices) store_->upsertDevices(devices->first, devices->second);
    if (!batches.empty()) store_->writeBatches(batches);
    batches_written = true;
    for (const auto& e : events) store_->writeEvent(run_id_, e);
    for (const auto& h : health) store_->writeHealth(run_id_, h);
    // After the batches: an incident's job is described in them. Each event is its own
    // transaction; those not written are put back below.
    while (!incident_events.empty()) {
      store_->writeIncidentEvent(run_id_, incident_events.front());
      incident_events.pop_front();
    }
  } catch (const std::exception& e) {
    ok = false;
    if (!failing_since_ms_)
      spdlog::error("writer: cannot write to the database, will retry: {}", e.what());
    last_error_ = e.what();
    // A damaged file (or none left open after a replacement that failed): a new one.
    if (reopen_ && (!store_ || Store::isCorruption(e))) replaced = replaceCorrupt(e.what());
  }

  lock.lock();
  if (batches_written) stats_.written_batches += batches.size();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  just_replaced_ = !replaced.empty();
  if (just_replaced_) events_.push({now_ms, "writer", "error", replaced});  // into the new DB
  if (ok) {
    if (failing_since_ms_) {
      const uint64_t dropped = stats_.dropped_batches - dropped_before_failing_;
      const std::string text =
          "database writes failed for " + std::to_string((now_ms - *failing_since_ms_) / 1000) +
          " s (" + std::to_string(failed_attempts_) + " attempts, last error: " + last_error_ +
          "); " + std::to_string(dropped) + " intervals dropped meanwhile";
      spdlog::warn("writer: writing again: {}", text);
      events_.push({now_ms, "writer", "warning", text});  // written with the next flush
      failing_since_ms_.reset();
      failed_attempts_ = 0;
    }
    return true;
  }
  ++stats_.failed_writes;
  if (!failing_since_ms_) {
    failing_since_ms_ = now_ms;
    dropped_before_failing_ = stats_.dropped_batches;
  }
  ++failed_attempts_;
  // Put back what failed, older than anything queued meanwhile, within the capacity.
  if (!batches_written) {
    events_.putBack(std::move(events));
    stats_.dropped_batches += batches_.putBack(
        {std::make_move_iterator(batches.begin()), std::make_move_iterator(batches.end())});
  }
  incident_events_.putBack(std::move(incident_events));
  if (!devices_ && devices) devices_ = std::move(devices);
  return false;
}

void SampleWriter::setRetention(std::chrono::milliseconds retain) {
  std::lock_guard lock(mutex_);
  retain_ = retain;
  next_prune_ = std::chrono::steady_clock::now();
}

// Called on the writer thread with the lock released.
void SampleWriter::pruneIfDue() {
  if (retain_.count() <= 0 || std::chrono::steady_clock::now() < next_prune_) return;
  next_prune_ = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const int64_t cutoff = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch() - retain_)
                             .count();
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t n = store_->pruneBefore(cutoff);
    if (n > 0) {
      spdlog::info("writer: retention pruned {} rows older than {} h in {} ms", n,
                   retain_.count() / 3'600'000,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - t0)
                       .count());
    }
    std::lock_guard lock(mutex_);
    stats_.pruned_rows += n;
  } catch (const std::exception& e) {
    spdlog::warn("writer: retention could not prune: {}", e.what());
  }
}

// With the lock released: the damaged DB is moved aside and a new one opened (disk I/O).
std::string SampleWriter::replaceCorrupt(const std::string& why) {
  try {
    store_.reset();  // closed before the file is renamed
    auto [store, run_id] = reopen_(why);
    store_ = std::move(store);
    run_id_ = run_id;
    std::string text = "the database became corrupt while recording (" + why +
                       "); it was moved aside and a new one started";
    spdlog::error("writer: {}", text);
    return text;
  } catch (const std::exception& e) {
    spdlog::error("writer: the database is corrupt and could not be replaced: {}", e.what());
    return {};
  }
}

// Called with the lock held. Each submit would otherwise wake the thread once a tick only for it
// to find the flush interval not over and sleep again: a context switch a second on a cold CPU
// for nothing (issue 47). Stopping notifies whatever the thread waits for.
bool SampleWriter::wantsWaking() const {
  return waiting_ == Waiting::kForWork ||
         (waiting_ == Waiting::kForFlush &&
          (halfFull() || std::chrono::steady_clock::now() >= flush_due_));
}

bool SampleWriter::halfFull() const { return batches_.size() >= batches_.capacity() / 2; }

void SampleWriter::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    waiting_ = Waiting::kForWork;
    wake_.wait(lock, [this] {
      return stopping_ || !batches_.empty() || !events_.empty() || !incident_events_.empty() ||
             !health_.empty() || devices_;
    });
    waiting_ = Waiting::kNot;
    if (stopping_) break;
    const auto woken = std::chrono::steady_clock::now();
    if (retain_.count() > 0 && woken >= next_prune_) {
      lock.unlock();
      pruneIfDue();
      lock.lock();
    }
    if (!writePending(lock)) {
      if (just_replaced_) continue;  // a new DB: write into it at once
      wake_.wait_for(lock, kRetryDelay, [this] { return stopping_; });
      if (stopping_) break;
      continue;
    }
    // Let the next flush interval's batches gather, then write at the first submission after
    // it: the tick that brings it has the host awake, where a timer of the thread's own woke it
    // cold, a wake-up that cost a fifth of the writer's time (issue 47). Due a tenth early, from
    // the tick that woke this flush, so that the tick an interval after it is the next: a crash
    // loses no more than before. finish() or a half-full queue cuts it short; without a
    // submission, an interval after it is due, on its own.
    if (flush_interval_.count() > 0) {
      flush_due_ = woken + flush_interval_ - flush_interval_ / 10;
      waiting_ = Waiting::kForFlush;
      wake_.wait_until(lock, flush_due_ + flush_interval_, [this] {
        return stopping_ || halfFull() ||
               (std::chrono::steady_clock::now() >= flush_due_ && !batches_.empty());
      });
      waiting_ = Waiting::kNot;
      if (stopping_) break;
    }
  }
}

bool SampleWriter::finish(int64_t ended_ms) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::unique_lock lock(mutex_);
  bool ok = writePending(lock);
  if (!ok && just_replaced_) ok = writePending(lock);  // into the DB that replaced a corrupt one
  if (!ok) {
    stats_.dropped_batches += batches_.clear();
  }
  const uint64_t dropped = stats_.dropped_batches;
  lock.unlock();
  try {
    if (!store_) throw StoreError("no database open");
    store_->endRun(run_id_, ended_ms, dropped);
  } catch (const std::exception& e) {
    spdlog::error("writer: cannot close the run in the database: {}", e.what());
    ok = false;
  }
  return ok;
}

}  // namespace stallwatch::storage
