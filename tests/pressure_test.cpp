#include "collectors/host/pressure.h"

#include <gtest/gtest.h>

#include "collectors/counter_rates.h"
#include "collectors/proc_file.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

struct PressureCase {
  const char* name;
  const char* text;
  bool some;
  bool full;
  size_t skipped;
};

class PressureParseTable : public ::testing::TestWithParam<PressureCase> {};

TEST_P(PressureParseTable, Parses) {
  const auto& c = GetParam();
  const auto parsed = parsePressure(c.text);
  EXPECT_EQ(parsed.stats.some.has_value(), c.some) << c.name;
  EXPECT_EQ(parsed.stats.full.has_value(), c.full) << c.name;
  EXPECT_EQ(parsed.skipped.size(), c.skipped) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PressureParseTable,
    ::testing::Values(
        PressureCase{"empty", "", false, false, 0},
        PressureCase{"some and full",
                     "some avg10=0.18 avg60=0.34 avg300=0.10 total=159886802\n"
                     "full avg10=0.18 avg60=0.34 avg300=0.10 total=159229614\n",
                     true, true, 0},
        PressureCase{"cpu before 5.13: some only",
                     "some avg10=0.10 avg60=2.00 avg300=3.85 total=15\n", true, false, 0},
        PressureCase{"unknown kind", "most avg10=0 avg60=0 avg300=0 total=1\n", false, false, 1},
        PressureCase{"missing total", "some avg10=0 avg60=0 avg300=0\n", false, false, 1},
        PressureCase{"wrong key", "some avg10=0 avg60=0 avg30=0 total=1\n", false, false, 1},
        PressureCase{"negative total", "some avg10=0 avg60=0 avg300=0 total=-1\n", false, false, 1},
        PressureCase{"non-numeric average", "some avg10=x avg60=0 avg300=0 total=1\n", false, false,
                     1},
        PressureCase{"extra field", "some avg10=0 avg60=0 avg300=0 total=1 x=2\n", false, false,
                     1}),
    testing::CaseName());

TEST(PressureParse, ReadsValuesOfTheNodeExporterFixture) {
  auto text = readTextFile(testing::fixtures() / "procfs/node_exporter/proc/pressure/io");
  ASSERT_TRUE(text);
  const auto parsed = parsePressure(*text);
  ASSERT_TRUE(parsed.stats.some && parsed.stats.full);
  EXPECT_EQ(parsed.stats.some->total_us, 159886802u);
  EXPECT_EQ(parsed.stats.full->total_us, 159229614u);
  EXPECT_DOUBLE_EQ(parsed.stats.some->avg60, 0.34);
}

TEST(StallRatio, IsTheShareOfTheInterval) {
  EXPECT_DOUBLE_EQ(*collectors::stallRatio(1'000'000, 1'250'000, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(*collectors::stallRatio(0, 500'000, 2.0), 0.25);
  EXPECT_DOUBLE_EQ(*collectors::stallRatio(0, 3'000'000, 1.0), 1.0);  // clamped
  EXPECT_FALSE(collectors::stallRatio(10, 5, 1.0));                   // went backwards
  EXPECT_FALSE(collectors::stallRatio(0, 5, 0.0));
}

TEST(PressureCollector, GivesSomeAndFullSharesPerResource) {
  testing::ScratchDir dir;
  auto write = [&](uint64_t io_some, uint64_t io_full, uint64_t cpu_some) {
    testing::writeFile(dir.path() / "proc/pressure/io",
                       "some avg10=0 avg60=0 avg300=0 total=" + std::to_string(io_some) +
                           "\nfull avg10=0 avg60=0 avg300=0 total=" + std::to_string(io_full) +
                           "\n");
    testing::writeFile(dir.path() / "proc/pressure/cpu",
                       "some avg10=0 avg60=0 avg300=0 total=" + std::to_string(cpu_some) + "\n");
  };
  write(0, 0, 0);
  auto collector = makePressureCollector(SystemRoot::under(dir.path()));
  SampleBatch first;
  collector->collect({0, 0}, first);
  EXPECT_TRUE(first.pressure.empty());
  write(500'000, 100'000, 250'000);
  SampleBatch second;
  // memory is missing in this tree: io and cpu still come through.
  EXPECT_EQ(collector->collect({1'000'000'000, 0}, second).outcome, Outcome::kData);
  ASSERT_EQ(second.pressure.size(), 2u);
  EXPECT_EQ(second.pressure[0].resource, "io");
  EXPECT_DOUBLE_EQ(*second.pressure[0].some_ratio, 0.5);
  EXPECT_DOUBLE_EQ(*second.pressure[0].full_ratio, 0.1);
  EXPECT_EQ(second.pressure[1].resource, "cpu");
  EXPECT_DOUBLE_EQ(*second.pressure[1].some_ratio, 0.25);
  EXPECT_FALSE(second.pressure[1].full_ratio);  // pre-5.13 cpu: no full line
}

TEST(PressureCollector, KernelWithoutPsiIsNoDataNotError) {
  testing::ScratchDir dir;
  auto collector = makePressureCollector(SystemRoot::under(dir.path()));
  SampleBatch batch;
  const auto r = collector->collect({0, 0}, batch);
  EXPECT_EQ(r.outcome, Outcome::kNoData);
  EXPECT_NE(r.message.find("unavailable"), std::string::npos);
}

}  // namespace
}  // namespace stallwatch::collectors
