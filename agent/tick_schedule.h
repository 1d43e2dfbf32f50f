// When the recorder's next tick is due, and whether a scrape of /metrics that comes now takes
// it. A tick taken by the scrape that asks for its page serves both with one wake-up of one
// thread: on a 2-CPU VM a thread's wake-up after a second asleep costs 60-175 us of CPU before
// it does anything (a C program that only sleeps), more than the scrape's own work, and a page
// collected at the scrape is of that moment rather than up to an interval old (issue 47).
//
// A scrape takes the tick when the tick is due within a tenth of the interval. A steady scraper
// (one connection asking every whole number of intervals, within that tenth) that finds the
// tick elsewhere moves it to itself once: the tick is taken at once when at least half an
// interval has passed since the last, else the next one is put an interval after this scrape;
// only while no steady scraper holds the ticks (none is expected), so that a second one at
// another phase does not take turns with the first. The tick a steady scraper is
// expected at waits a tenth of the interval more for it, so that a scrape a little late still
// takes it. Without a scraper the ticks keep the interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace stallwatch::agent {

class TickSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  TickSchedule(Clock::duration interval, Clock::time_point start);

  // When to take the next tick if no scrape takes it first.
  Clock::time_point wakeAt() const;
  // The time the next tick is due (what a timer-taken tick is stamped as scheduled for).
  Clock::time_point due() const { return due_; }
  // A scrape of the page at NOW; SINCE_PREVIOUS is the time since its connection's previous
  // request (none: its first). True when the tick is to be taken now, for this scrape.
  bool onScrape(Clock::time_point now, std::optional<Clock::duration> since_previous);
  // The tick was taken: at AT (a scrape's moment, or due() for the timer's), finishing at
  // FINISHED. Returns the ticks skipped because it overran the next one's time.
  uint64_t ticked(Clock::time_point at, Clock::time_point finished, bool by_scrape);

 private:
  const Clock::duration interval_, lead_;  // lead_: the tenth within which a scrape takes it
  Clock::time_point due_;
  Clock::time_point last_;
  std::optional<Clock::time_point> expected_scrape_;  // a steady scraper's next request
};

}  // namespace stallwatch::agent
