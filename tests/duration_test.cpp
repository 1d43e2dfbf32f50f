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
}

TEST(Duration, RejectsGarbage) {
  for (const char* bad : {"", "s", "-1s", "1x", "1 s", "1s2", "..", "1e3s", "99999999999d"}) {
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
  // Found by fuzz_config: 37 digits threw out of std::stoll and ended the process.
  EXPECT_FALSE(parseTimeArg("1444444444444444444444444444444444444", 0));
  EXPECT_EQ(parseTimeArg("2h", 10'000'000), 10'000'000 - 7'200'000);
  EXPECT_FALSE(parseTimeArg("yesterday", 0));
}

}  // namespace
}  // namespace stallwatch::cli
