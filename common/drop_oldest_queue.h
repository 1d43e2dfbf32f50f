// A FIFO of at most a fixed number of items that drops the oldest to take a new one: the
// sampling thread hands work to a slower consumer (the DB writer, hooks, the webhook) and
// never waits on it. Not synchronised: the owner's mutex guards it, and the owner's thread
// consumes it (all at once, one at a time, or with retries: that part differs per owner).
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

namespace stallwatch::common {

template <typename T>
class DropOldestQueue {
 public:
  explicit DropOldestQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Adds ITEM at the back, dropping the oldest first when full. Returns how many were dropped.
  size_t push(T item) {
    const size_t dropped = trimTo(capacity_ - 1);
    items_.push_back(std::move(item));
    return dropped;
  }
  // Puts back ITEMS taken earlier (oldest first) in front of anything queued since, then
  // drops the oldest beyond the capacity. Returns how many were dropped.
  size_t putBack(std::deque<T> items) {
    for (auto it = items.rbegin(); it != items.rend(); ++it) items_.push_front(std::move(*it));
    return trimTo(capacity_);
  }
  std::optional<T> pop() {
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }
  // Everything queued, oldest first; the queue is left empty.
  std::deque<T> takeAll() { return std::exchange(items_, {}); }

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }
  // Drops everything; returns how many.
  size_t clear() { return std::exchange(items_, {}).size(); }

 private:
  size_t trimTo(size_t n) {
    size_t dropped = 0;
    while (items_.size() > n) {
      items_.pop_front();
      ++dropped;
    }
    return dropped;
  }

  size_t capacity_;
  std::deque<T> items_;
};

}  // namespace stallwatch::common
