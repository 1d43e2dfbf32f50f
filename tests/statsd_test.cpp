#include "collectors/jobs/statsd.h"

#include <gtest/gtest.h>

#include "collectors/jobs/dataloader_socket.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

struct StatsdCase {
  const char* name;
  const char* text;
  size_t metrics;
  size_t skipped;
};

class StatsdParseTable : public ::testing::TestWithParam<StatsdCase> {};

TEST_P(StatsdParseTable, Parses) {
  const auto& c = GetParam();
  const auto parsed = parseStatsd(c.text);
  EXPECT_EQ(parsed.metrics.size(), c.metrics) << c.name;
  EXPECT_EQ(parsed.skipped.size(), c.skipped) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Lines, StatsdParseTable,
    ::testing::Values(StatsdCase{"empty", "", 0, 0}, StatsdCase{"counter", "a.b:1|c", 1, 0},
                      StatsdCase{"timer with rate and tags", "a:2.5|ms|@0.5|#pid:1,rank:0\n", 1, 0},
                      StatsdCase{"gauge", "g:-3|g", 1, 0},
                      StatsdCase{"several lines, CRLF", "a:1|c\r\nb:2|c\r\n", 2, 0},
                      StatsdCase{"no colon", "abc|c", 0, 1}, StatsdCase{"no type", "a:1", 0, 1},
                      StatsdCase{"bad type", "a:1|h", 0, 1}, StatsdCase{"bad value", "a:x|c", 0, 1},
                      StatsdCase{"infinite value", "a:inf|c", 0, 1},
                      StatsdCase{"empty name", ":1|c", 0, 1},
                      StatsdCase{"name with space", "a b:1|c", 0, 1},
                      StatsdCase{"rate of zero", "a:1|c|@0", 0, 1},
                      StatsdCase{"rate above one", "a:1|c|@2", 0, 1},
                      StatsdCase{"unknown section", "a:1|c|x", 0, 1},
                      StatsdCase{"binary junk", "\x01\x02\xff:\x00|c", 0, 1},
                      StatsdCase{"good after bad", "bad\na:1|c", 1, 1}),
    testing::CaseName());

TEST(StatsdParse, KeepsValuesRatesAndTags) {
  const auto parsed = parseStatsd("stallwatch.dataloader.wait:12.5|ms|@0.25|#a,b\n");
  ASSERT_EQ(parsed.metrics.size(), 1u);
  const auto& m = parsed.metrics[0];
  EXPECT_EQ(m.name, "stallwatch.dataloader.wait");
  EXPECT_DOUBLE_EQ(m.value, 12.5);
  EXPECT_EQ(m.type, StatsdType::kTimer);
  EXPECT_DOUBLE_EQ(m.sample_rate, 0.25);
  EXPECT_EQ(m.tags, (std::vector<std::string>{"a", "b"}));
}

TEST(StatsdParse, RefusesOverlongNamesAndTooManyTags) {
  EXPECT_EQ(parseStatsd(std::string(kMaxStatsdNameBytes + 1, 'a') + ":1|c").skipped.size(), 1u);
  std::string tags = "a:1|c|#";
  for (size_t i = 0; i <= kMaxStatsdTags; ++i) tags += "t,";
  EXPECT_EQ(parseStatsd(tags).skipped.size(), 1u);
}

TEST(DataloaderMetrics, PackageFormatAccumulates) {
  DataloaderTotals t;
  const auto unknown = accumulateDataloaderMetrics(
      parseStatsd("stallwatch.dataloader.steps:10|c\nstallwatch.dataloader.samples:320|c\n"
                  "stallwatch.dataloader.wait:250|ms\nstallwatch.dataloader.step:750|ms\n")
          .metrics,
      t);
  EXPECT_EQ(unknown, 0u);
  EXPECT_EQ(t.steps, 10u);
  EXPECT_EQ(t.samples, 320u);
  EXPECT_DOUBLE_EQ(t.wait_seconds, 0.25);
  EXPECT_DOUBLE_EQ(t.step_seconds, 0.75);
}

TEST(DataloaderMetrics, TimerPerStepCountsStepsWithoutACounter) {
  DataloaderTotals t;
  accumulateDataloaderMetrics(parseStatsd("dataloader.wait:10|ms\ndataloader.wait:30|ms\n"
                                          "dataloader.samples:4|c|@0.5")
                                  .metrics,
                              t);
  EXPECT_EQ(t.steps, 2u);
  EXPECT_EQ(t.samples, 8u);  // sent at rate 0.5
  EXPECT_DOUBLE_EQ(t.wait_seconds, 0.04);
}

TEST(DataloaderMetrics, UnknownAndNegativeAreCountedNotUsed) {
  DataloaderTotals t;
  EXPECT_EQ(
      accumulateDataloaderMetrics(
          parseStatsd("other.metric:1|c\ndataloader.wait:-5|ms\ndataloader.steps:1|g").metrics, t),
      3u);
  EXPECT_EQ(t.steps, 0u);
  EXPECT_DOUBLE_EQ(t.wait_seconds, 0.0);
}

// One hostile datagram must not break the DB: values no loop could produce are rejected at
// the boundary (counted with the unknown ones), and totals saturate instead of wrapping.
TEST(DataloaderMetrics, OutOfRangeValuesAreRejectedNotStored) {
  DataloaderTotals t;
  EXPECT_EQ(accumulateDataloaderMetrics(parseStatsd("dataloader.steps:9223372036854775807|c\n"
                                                    "dataloader.samples:1e300|c\n"
                                                    "dataloader.wait:1e300|ms\n"
                                                    "dataloader.step:1e12|ms\n"
                                                    "dataloader.steps:1|c|@0.0000000001\n")
                                            .metrics,
                                        t),
            5u);
  EXPECT_EQ(t.steps, 0u);
  EXPECT_EQ(t.samples, 0u);
  EXPECT_DOUBLE_EQ(t.wait_seconds, 0.0);
  EXPECT_DOUBLE_EQ(t.step_seconds, 0.0);
  // Many large but valid reports saturate below what SQLite's INTEGER holds.
  const auto big = parseStatsd("dataloader.steps:1000000000|c").metrics;
  for (int i = 0; i < 1001; ++i) accumulateDataloaderMetrics(big, t);
  EXPECT_LE(t.steps, static_cast<uint64_t>(INT64_MAX));
  EXPECT_EQ(t.steps, kMaxDataloaderTotal);
}

}  // namespace
}  // namespace stallwatch::collectors
