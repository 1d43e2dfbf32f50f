#include "cli/duration.h"

#include <gtest/gtest.h>

namespace stallwatch::cli {
namespace {

using namespace std::chrono_literals;

TEST(Duration, ParsesUnits) {
  EXPECT_EQ(parseDuration("500ms"), 500ms);
  EXPECT_EQ(parseDuration("1s"), 1s);
  EXPECT_EQ(parseDuration("2.5s"), 2500ms);
  EXPECT_EQ(parseDuration("10"), 10s);
  EXPECT_EQ(parseDuration("10m"), 10min);
  EXPECT_EQ(parseDuration("1h"), 1h);
  EXPECT_EQ(parseDuration("14d"), 14 * 24h);
  EXPECT_EQ(parseDuration("1h30m"), 90min);
  EXPECT_EQ(parseDuration("2m30s"), 150s);
  EXPECT_EQ(parseDuration("1d12h"), 36h);
}

TEST(Duration, RejectsGarbage) {
  for (const char* bad :
       {"", "s", "-1s", "1x", "1 s", "1s2", "..", "1e3s", "99999999999d", "1h30", "1hh", "h1"}) {
    EXPECT_FALSE(parseDuration(bad)) << bad;
  }
}

TEST(Duration, Formats) {
  EXPECT_EQ(formatDuration(2s), "2s");
  EXPECT_EQ(formatDuration(250ms), "250ms");
}

}  // namespace
}  // namespace stallwatch::cli

#include "cli/time_arg.h"

namespace stallwatch::cli {
namespace {

TEST(TimeArg, EpochMillisecondsAndOverflow) {
  EXPECT_EQ(parseTimeArg("1795318653717", 0), 1795318653717);
  // Epoch seconds (they were read as "that many seconds ago"), with a fraction too, and 0.
  EXPECT_EQ(parseTimeArg("1795318660", 5), 1795318660000);
  EXPECT_EQ(parseTimeArg("1795318660.25", 5), 1795318660250);
  EXPECT_EQ(parseTimeArg("0", 5), 0);
  // Found by fuzz_config: 37 digits threw out of std::stoll and ended the process.
  EXPECT_FALSE(parseTimeArg("1444444444444444444444444444444444444", 0));
  EXPECT_EQ(parseTimeArg("2h", 10'000'000), 10'000'000 - 7'200'000);
  EXPECT_FALSE(parseTimeArg("yesterday", 0));
  EXPECT_EQ(parseTimeArg("1h30m", 10'000'000), 10'000'000 - 5'400'000);
}

TEST(TimeArg, Iso8601DatesTimesAndOffsets) {
  constexpr int64_t kMidnight = 1795305600000;  // 2026-11-22T00:00:00Z
  EXPECT_EQ(parseTimeArg("2026-11-22", 0), kMidnight);
  EXPECT_EQ(parseTimeArg("2026-11-22T02:00", 0), kMidnight + 7'200'000);
  EXPECT_EQ(parseTimeArg("2026-11-22 02:00:30", 0), kMidnight + 7'230'000);
  EXPECT_EQ(parseTimeArg("2026-11-22T02:00:30Z", 0), kMidnight + 7'230'000);
  EXPECT_EQ(parseTimeArg("2026-11-22T02:00:30.5Z", 0), kMidnight + 7'230'500);
  EXPECT_EQ(parseTimeArg("2026-11-22T04:00+02:00", 0), kMidnight + 7'200'000);
  EXPECT_EQ(parseTimeArg("2026-11-22T04:00+0200", 0), kMidnight + 7'200'000);
  EXPECT_EQ(parseTimeArg("2026-11-21T21:00-05", 0), kMidnight + 7'200'000);
  for (const char* bad :
       {"2026-13-01", "2026-11-22T25:00", "2026-11-22T02", "2026-11-22T02:00+2", "2026-11-22x",
        "2026-11-22T04:00+02:3", "2026-11-22T04:00+02x00", "2026-11-22T02:00:30.", "1.2.3", "."}) {
    EXPECT_FALSE(parseTimeArg(bad, 0)) << bad;
  }
}

}  // namespace
}  // namespace stallwatch::cli
