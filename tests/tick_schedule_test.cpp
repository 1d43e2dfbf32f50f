#include "agent/tick_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace stallwatch::agent {
namespace {

using namespace std::chrono_literals;
using Clock = TickSchedule::Clock;

const Clock::time_point t0{};

// Runs SCHEDULE from FROM to UNTIL with a scraper asking every PERIOD from FIRST on one kept
// connection (PERIOD zero: none), each tick taking WORK; returns when each tick was taken and
// whether a scrape took it.
struct Taken {
  Clock::duration at;
  bool by_scrape;
};
std::vector<Taken> simulate(TickSchedule& schedule, Clock::duration first, Clock::duration period,
                            Clock::duration until, Clock::duration work = 300us) {
  std::vector<Taken> taken;
  Clock::time_point next_scrape = t0 + first;
  std::optional<Clock::time_point> previous_scrape;
  while (true) {
    const Clock::time_point wake = schedule.wakeAt();
    const bool scrape_first = period > 0ns && next_scrape < wake;
    const Clock::time_point now = scrape_first ? next_scrape : wake;
    if (now - t0 > until) break;
    if (scrape_first) {
      std::optional<Clock::duration> since;
      if (previous_scrape) since = now - *previous_scrape;
      previous_scrape = now;
      next_scrape += period;
      if (!schedule.onScrape(now, since)) continue;
      schedule.ticked(now, now + work, true);
      taken.push_back({now - t0, true});
    } else {
      const Clock::time_point due = schedule.due();
      schedule.ticked(due, now + work, false);
      taken.push_back({due - t0, false});
    }
  }
  return taken;
}

TEST(TickSchedule, WithoutAScraperTicksKeepTheInterval) {
  TickSchedule schedule(1s, t0);
  const auto taken = simulate(schedule, 0s, 0s, 10s);
  ASSERT_EQ(taken.size(), 10u);
  for (size_t i = 0; i < taken.size(); ++i) {
    EXPECT_EQ(taken[i].at, std::chrono::seconds(i + 1));
    EXPECT_FALSE(taken[i].by_scrape);
  }
}

TEST(TickSchedule, AScraperAtTheIntervalTakesEveryTickOnceItsPhaseIsFound) {
  // Phases a quarter, a half and nine tenths of an interval after the ticks: the first finds
  // the tick soon after the last and moves the next one; the others take it at once.
  for (const auto phase : {250ms, 600ms, 900ms}) {
    TickSchedule schedule(1s, t0);
    const auto taken = simulate(schedule, 1s + phase, 1s, 20s);
    ASSERT_GE(taken.size(), 18u) << phase.count();
    // From the third tick on, each is a scrape's, an interval apart.
    for (size_t i = 3; i < taken.size(); ++i) {
      EXPECT_TRUE(taken[i].by_scrape) << phase.count() << " tick " << i;
      EXPECT_EQ(taken[i].at - taken[i - 1].at, 1s) << phase.count() << " tick " << i;
    }
    // No interval while finding it was shorter than half or longer than one and a half.
    for (size_t i = 1; i < taken.size(); ++i) {
      EXPECT_GE(taken[i].at - taken[i - 1].at, 500ms) << phase.count();
      EXPECT_LE(taken[i].at - taken[i - 1].at, 1600ms) << phase.count();
    }
  }
}

TEST(TickSchedule, AScrapeALittleLateStillTakesTheAwaitedTick) {
  // Locked on a scraper, then its requests come 50 ms after the due time: the awaited tick waits
  // for them (a tenth of the interval) rather than waking on its own.
  TickSchedule schedule(1s, t0);
  ASSERT_TRUE(schedule.onScrape(t0 + 950ms, std::nullopt));
  schedule.ticked(t0 + 950ms, t0 + 951ms, true);
  ASSERT_FALSE(schedule.onScrape(t0 + 1200ms, std::nullopt));  // a person's curl: no effect
  ASSERT_TRUE(schedule.onScrape(t0 + 1950ms, 1s));
  schedule.ticked(t0 + 1950ms, t0 + 1951ms, true);
  EXPECT_EQ(schedule.due(), t0 + 2950ms);
  EXPECT_EQ(schedule.wakeAt(), t0 + 3050ms);
  EXPECT_TRUE(schedule.onScrape(t0 + 3000ms, 1050ms));
}

TEST(TickSchedule, WhenTheScraperStopsTheTicksGoOnAtTheInterval) {
  TickSchedule schedule(1s, t0);
  auto taken = simulate(schedule, 1400ms, 1s, 6s);
  ASSERT_TRUE(taken.back().by_scrape);
  const Clock::duration last = taken.back().at;
  // No more scrapes: one tick waits the tenth for it, then they keep the interval.
  EXPECT_EQ(schedule.wakeAt() - t0, last + 1100ms);
  schedule.ticked(schedule.due(), schedule.wakeAt(), false);
  EXPECT_EQ(schedule.wakeAt() - t0, last + 2s);
  schedule.ticked(schedule.due(), schedule.wakeAt(), false);
  EXPECT_EQ(schedule.wakeAt() - t0, last + 3s);
}

TEST(TickSchedule, AScraperEveryFewIntervalsTakesTheTickItComesAt) {
  // Prometheus every 15 s over 1 s ticks: every fifteenth tick is a scrape's, the rest the
  // timer's, an interval apart throughout once found.
  TickSchedule schedule(1s, t0);
  const auto taken = simulate(schedule, 3300ms, 15s, 95s);
  size_t by_scrape = 0;
  for (size_t i = 1; i < taken.size(); ++i) {
    by_scrape += taken[i].by_scrape;
    if (taken[i].at > 20s) {
      EXPECT_EQ(taken[i].at - taken[i - 1].at, 1s) << i;
    }
  }
  EXPECT_GE(by_scrape, 5u);
}

TEST(TickSchedule, ScrapesFasterThanTheIntervalDoNotShortenIt) {
  TickSchedule schedule(1s, t0);
  const auto taken = simulate(schedule, 300ms, 300ms, 20s);
  for (size_t i = 1; i < taken.size(); ++i) EXPECT_GE(taken[i].at - taken[i - 1].at, 900ms) << i;
  EXPECT_GE(taken.size(), 19u);
}

TEST(TickSchedule, TwoSteadyScrapersAtOtherPhasesDoNotTakeTurns) {
  // A Prometheus pair, each every interval on its own connection, half an interval apart (and
  // at other offsets): one holds the ticks, the other gets the page as it is; never two ticks
  // an interval.
  for (const auto offset : {500ms, 300ms, 700ms, 950ms}) {
    TickSchedule schedule(1s, t0);
    std::vector<Clock::duration> taken;
    Clock::time_point a = t0 + 1200ms, b = a + offset;
    std::optional<Clock::time_point> a_prev, b_prev;
    while (true) {
      const auto wake = schedule.wakeAt();
      const auto now = std::min({a, b, wake});
      if (now - t0 > 30s) break;
      if (now == wake && now < a && now < b) {
        schedule.ticked(schedule.due(), now + 300us, false);
        taken.push_back(now - t0);
        continue;
      }
      auto& prev = now == a ? a_prev : b_prev;
      std::optional<Clock::duration> since;
      if (prev) since = now - *prev;
      prev = now;
      (now == a ? a : b) += 1s;
      if (schedule.onScrape(now, since)) {
        schedule.ticked(now, now + 300us, true);
        taken.push_back(now - t0);
      }
    }
    EXPECT_LE(taken.size(), 31u) << offset.count();
    for (size_t i = 4; i < taken.size(); ++i)
      EXPECT_EQ(taken[i] - taken[i - 1], 1s) << offset.count() << " tick " << i;
  }
}

TEST(TickSchedule, AnOverrunSkipsTheTicksItMissed) {
  TickSchedule schedule(1s, t0);
  EXPECT_EQ(schedule.ticked(t0 + 1s, t0 + 1500ms, false), 0u);
  EXPECT_EQ(schedule.ticked(t0 + 2s, t0 + 4200ms, false), 2u);
  EXPECT_EQ(schedule.due(), t0 + 5s);
}

}  // namespace
}  // namespace stallwatch::agent
