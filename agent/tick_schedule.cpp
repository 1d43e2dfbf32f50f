#include "agent/tick_schedule.h"

namespace stallwatch::agent {

TickSchedule::TickSchedule(Clock::duration interval, Clock::time_point start)
    : interval_(interval), lead_(interval / 10), due_(start + interval), last_(start) {}

TickSchedule::Clock::time_point TickSchedule::wakeAt() const {
  const bool awaited =
      expected_scrape_ && *expected_scrape_ < due_ + lead_ && due_ < *expected_scrape_ + lead_;
  return awaited ? due_ + lead_ : due_;
}

bool TickSchedule::onScrape(Clock::time_point now, std::optional<Clock::duration> since_previous) {
  // Steady: within a tenth of a whole number (one or more) of intervals since the last request.
  bool steady = false;
  if (since_previous) {
    const auto whole = (*since_previous + interval_ / 2) / interval_;
    const auto off = *since_previous - interval_ * whole;
    steady = whole >= 1 && off < lead_ && -off < lead_;
  }
  if (now >= due_ - lead_) {
    if (steady) expected_scrape_ = now + *since_previous;
    return true;
  }
  // Only a schedule no scraper holds moves: while one is expected, a second steady scraper (a
  // Prometheus pair at another phase) gets the page as it is, rather than the two taking turns.
  const bool held = expected_scrape_ && now < *expected_scrape_ + lead_;
  if (!steady || held) return false;
  expected_scrape_ = now + *since_previous;
  if (now - last_ >= interval_ / 2) return true;
  due_ = now + interval_;  // too soon after the last: the next one moves to this scrape's phase
  return false;
}

uint64_t TickSchedule::ticked(Clock::time_point at, Clock::time_point finished, bool by_scrape) {
  // A scraper awaited by a timer's tick that did not come has gone or moved.
  if (!by_scrape && expected_scrape_ && *expected_scrape_ < at + lead_) expected_scrape_.reset();
  last_ = at;
  due_ = (by_scrape ? at : due_) + interval_;
  if (finished < due_) return 0;
  // Overran: the ticks it missed are skipped, not fired back to back.
  const auto skipped = static_cast<uint64_t>((finished - due_) / interval_) + 1;
  due_ += interval_ * static_cast<int64_t>(skipped);
  return skipped;
}

}  // namespace stallwatch::agent
