#include "collectors/devices/diskstats.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "collectors/counter_rates.h"
#include "collectors/devices/block_devices.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

struct ParseCase {
  const char* name;
  const char* text;
  size_t devices;
  size_t skipped;
};

class DiskstatsParseTable : public ::testing::TestWithParam<ParseCase> {};

TEST_P(DiskstatsParseTable, CountsDevicesAndSkips) {
  const ParseCase& c = GetParam();
  const DiskstatsParse parsed = parseDiskstats(c.text);
  EXPECT_EQ(parsed.devices.size(), c.devices) << c.name;
  EXPECT_EQ(parsed.skipped.size(), c.skipped) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DiskstatsParseTable,
    ::testing::Values(
        ParseCase{"empty", "", 0, 0}, ParseCase{"blank lines", "\n\n  \n", 0, 0},
        ParseCase{"14 fields (<4.18)", "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n", 1, 0},
        ParseCase{"18 fields (4.18+)", "8 16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n", 1, 0},
        ParseCase{"20 fields (5.5+)", "8 32 sdc 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", 1, 0},
        ParseCase{"too few fields", "8 0 sda 1 2 3 4 5 6 7\n", 0, 1},
        ParseCase{"pre-2.6.25 partition (7 fields)", "8 1 sda1 1 2 3 4\n", 0, 1},
        ParseCase{"between layouts (16)", "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13\n", 0, 1},
        ParseCase{"too many fields", "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n", 0,
                  1},
        ParseCase{"negative counter", "8 0 sda 1 2 3 -4 5 6 7 8 9 10 11\n", 0, 1},
        ParseCase{"non-numeric counter", "8 0 sda 1 2 3 x 5 6 7 8 9 10 11\n", 0, 1},
        ParseCase{"overflowing counter", "8 0 sda 1 2 3 99999999999999999999 5 6 7 8 9 10 11\n", 0,
                  1},
        ParseCase{"bad line among good",
                  "8 0 sda 1 2 3 4 5 6 7 8 9 10 11\ngarbage\n8 16 sdb 1 2 3 4 5 6 7 8 9 10 11\n", 2,
                  1},
        ParseCase{"tabs and no final newline", "8\t0\tsda 1 2 3 4 5 6 7 8 9 10 11", 1, 0}),
    testing::CaseName());

TEST(DiskstatsParse, NamesTheLineAndTheToken) {
  const auto parsed =
      parseDiskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n8 0 sdb 1 2 x 4 5 6 7 8 9 10 11\n");
  ASSERT_EQ(parsed.skipped.size(), 1u);
  EXPECT_EQ(parsed.skipped[0].line, 2u);
  EXPECT_NE(parsed.skipped[0].message.find("'x'"), std::string::npos);
  EXPECT_NE(parsed.skipped[0].message.find("field 6"), std::string::npos);
}

// The one-pass reading against the fields read one by one, on lines of every width with numbers
// at and past 64 bits, signs, letters and tabs: the same devices, the same problems.
TEST(DiskstatsParse, TheOnePassReadingAgreesWithTheFieldByFieldOne) {
  std::mt19937 random(47);
  const char* const tokens[] = {
      "0",  "7",    "18446744073709551615", "18446744073709551616", "4294967296", "-1", "x",
      "1a", "00012"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int lines = 1 + static_cast<int>(random() % 4);
    for (int l = 0; l < lines; ++l) {
      const size_t fields = 12 + random() % 10;  // 12-21: every width a kernel prints and more
      for (size_t i = 0; i < fields; ++i) {
        if (i > 0) text += random() % 5 == 0 ? "\t " : " ";
        if (i == 2) {
          text += "nvme0n1";
        } else if (random() % 8 == 0) {
          text += tokens[random() % std::size(tokens)];
        } else {
          text += std::to_string(random() % 100000);
        }
      }
      text += "\n";
    }
    // The reference: split, then each number read alone.
    std::vector<std::vector<uint64_t>> expected;
    size_t expected_skipped = 0;
    forEachLine(text, [&](std::string_view line, size_t) {
      std::string_view f[20];
      const size_t count = splitFields(line, f);
      bool ok = count == 14 || count == 18 || count == 20;
      std::vector<uint64_t> numbers;
      for (size_t i = 0; ok && i < count; ++i) {
        if (i == 2) continue;
        const auto n = parseUnsigned(f[i]);
        ok = n.has_value() && (i > 1 || *n <= UINT32_MAX);
        if (ok) numbers.push_back(*n);
      }
      if (ok) {
        expected.push_back(numbers);
      } else {
        ++expected_skipped;
      }
    });
    const DiskstatsParse parsed = parseDiskstats(text);
    ASSERT_EQ(parsed.devices.size(), expected.size()) << text;
    ASSERT_EQ(parsed.skipped.size(), expected_skipped) << text;
    for (size_t d = 0; d < expected.size(); ++d) {
      const DiskStats& got = parsed.devices[d];
      EXPECT_EQ(got.name, "nvme0n1");
      EXPECT_EQ(got.major, expected[d][0]) << text;
      EXPECT_EQ(got.minor, expected[d][1]) << text;
      EXPECT_EQ(got.reads_completed, expected[d][2]) << text;
      EXPECT_EQ(got.weighted_io_time_ms, expected[d][12]) << text;
      if (expected[d].size() == 19) {
        EXPECT_EQ(got.flush_time_ms, expected[d][18]) << text;
      }
    }
  }
}

TEST(DiskstatsParse, MapsEveryFieldOfThe20FieldLayout) {
  const auto parsed = parseDiskstats("259 0 nvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
  ASSERT_EQ(parsed.devices.size(), 1u);
  const DiskStats& d = parsed.devices[0];
  EXPECT_EQ(d.major, 259u);
  EXPECT_EQ(d.minor, 0u);
  EXPECT_EQ(d.name, "nvme0n1");
  EXPECT_EQ(d.reads_completed, 1u);
  EXPECT_EQ(d.reads_merged, 2u);
  EXPECT_EQ(d.read_sectors, 3u);
  EXPECT_EQ(d.read_time_ms, 4u);
  EXPECT_EQ(d.writes_completed, 5u);
  EXPECT_EQ(d.writes_merged, 6u);
  EXPECT_EQ(d.write_sectors, 7u);
  EXPECT_EQ(d.write_time_ms, 8u);
  EXPECT_EQ(d.in_flight, 9u);
  EXPECT_EQ(d.io_ticks_ms, 10u);
  EXPECT_EQ(d.weighted_io_time_ms, 11u);
  EXPECT_EQ(d.discards_completed, 12u);
  EXPECT_EQ(d.discards_merged, 13u);
  EXPECT_EQ(d.discard_sectors, 14u);
  EXPECT_EQ(d.discard_time_ms, 15u);
  EXPECT_EQ(d.flushes_completed, 16u);
  EXPECT_EQ(d.flush_time_ms, 17u);
}

TEST(DiskstatsParse, OldLayoutHasNoDiscardOrFlushFields) {
  const auto parsed = parseDiskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n");
  ASSERT_EQ(parsed.devices.size(), 1u);
  EXPECT_FALSE(parsed.devices[0].discards_completed);
  EXPECT_FALSE(parsed.devices[0].flushes_completed);
}

// node_exporter's fixture mixes all three layouts (composite test file).
TEST(DiskstatsParse, NodeExporterFixtureHasAllThreeLayouts) {
  auto text = readTextFile(testing::fixtures() / "procfs/node_exporter/proc/diskstats");
  ASSERT_TRUE(text);
  const auto parsed = parseDiskstats(*text);
  EXPECT_TRUE(parsed.skipped.empty());
  ASSERT_EQ(parsed.devices.size(), 51u);
  size_t with_discards = 0;
  size_t with_flushes = 0;
  for (const auto& d : parsed.devices) {
    with_discards += d.discards_completed.has_value();
    with_flushes += d.flushes_completed.has_value();
  }
  EXPECT_EQ(with_discards, 5u);  // sdb, sdb1, sdb2 (18 fields) + sdc, sdc1 (20 fields)
  EXPECT_EQ(with_flushes, 2u);
  const auto sda = std::find_if(parsed.devices.begin(), parsed.devices.end(),
                                [](const DiskStats& d) { return d.name == "sda"; });
  ASSERT_NE(sda, parsed.devices.end());
  EXPECT_EQ(sda->reads_completed, 25354637u);
  EXPECT_EQ(sda->weighted_io_time_ms, 82621804u);
  EXPECT_EQ(sda->read_time_ms, 18492372u);
}

DiskStats stats(uint64_t reads, uint64_t read_sectors, uint64_t read_ms, uint64_t writes,
                uint64_t write_sectors, uint64_t write_ms, uint64_t io_ticks, uint64_t weighted) {
  DiskStats d;
  d.reads_completed = reads;
  d.read_sectors = read_sectors;
  d.read_time_ms = read_ms;
  d.writes_completed = writes;
  d.write_sectors = write_sectors;
  d.write_time_ms = write_ms;
  d.io_ticks_ms = io_ticks;
  d.weighted_io_time_ms = weighted;
  return d;
}

TEST(DiskRates, FollowIostatDefinitions) {
  const DiskStats a = stats(1000, 8000, 500, 200, 4000, 1000, 10000, 20000);
  const DiskStats b = stats(1100, 9600, 900, 250, 5000, 1500, 10500, 21500);
  const auto r = collectors::computeDiskRates(a, b, 2.0);
  ASSERT_TRUE(r.rates);
  EXPECT_DOUBLE_EQ(r.rates->reads_per_second, 50.0);
  EXPECT_DOUBLE_EQ(r.rates->writes_per_second, 25.0);
  EXPECT_DOUBLE_EQ(r.rates->read_bytes_per_second, 1600.0 * 512 / 2);
  EXPECT_DOUBLE_EQ(r.rates->write_bytes_per_second, 1000.0 * 512 / 2);
  EXPECT_DOUBLE_EQ(*r.rates->r_await_ms, 4.0);    // 400 ms / 100 reads
  EXPECT_DOUBLE_EQ(*r.rates->w_await_ms, 10.0);   // 500 ms / 50 writes
  EXPECT_DOUBLE_EQ(r.rates->aqu_sz, 0.75);        // 1500 ms of queue-time over 2000 ms
  EXPECT_DOUBLE_EQ(r.rates->util_percent, 25.0);  // 500 ms busy of 2000 ms
  EXPECT_FALSE(r.rates->discards_per_second);     // old layout: no discard fields
}

TEST(DiskRates, AwaitWithoutIoIsNullNotZero) {
  const DiskStats a = stats(10, 80, 5, 10, 80, 5, 100, 100);
  const auto r = collectors::computeDiskRates(a, a, 1.0);
  ASSERT_TRUE(r.rates);
  EXPECT_FALSE(r.rates->r_await_ms);
  EXPECT_FALSE(r.rates->w_await_ms);
  EXPECT_DOUBLE_EQ(r.rates->reads_per_second, 0.0);
}

TEST(DiskRates, MillisecondCountersWrapAt32Bits) {
  const uint64_t near_wrap = (uint64_t{1} << 32) - 100;
  DiskStats a = stats(1000, 8000, near_wrap, 0, 0, 0, near_wrap, near_wrap);
  DiskStats b = stats(1010, 8080, 100, 0, 0, 0, 300, 900);  // wrapped: +200, +400, +1000 ms
  const auto r = collectors::computeDiskRates(a, b, 1.0);
  ASSERT_TRUE(r.rates);
  EXPECT_DOUBLE_EQ(*r.rates->r_await_ms, 20.0);
  EXPECT_DOUBLE_EQ(r.rates->util_percent, 40.0);
  EXPECT_DOUBLE_EQ(r.rates->aqu_sz, 1.0);
}

TEST(DiskRates, CountsGoingBackwardsMeanAResetAndGiveNoRates) {
  const DiskStats a = stats(1000, 8000, 500, 10, 10, 10, 10, 10);
  const DiskStats b = stats(5, 40, 3, 10, 10, 10, 10, 10);
  const auto r = collectors::computeDiskRates(a, b, 1.0);
  EXPECT_FALSE(r.rates);
  EXPECT_EQ(r.gap, collectors::RateGap::kCounterReset);
}

TEST(DiskRates, ZeroElapsedGivesNoRates) {
  const DiskStats a = stats(1, 1, 1, 1, 1, 1, 1, 1);
  EXPECT_EQ(collectors::computeDiskRates(a, a, 0.0).gap, collectors::RateGap::kNoTimeElapsed);
}

TEST(DiskRates, DiscardAndFlushAwaitsOnNewKernels) {
  auto parsed = parseDiskstats(
      "8 32 sdc 0 0 0 0 0 0 0 0 0 0 0 10 0 80 20 4 8\n"
      "8 32 sdc 0 0 0 0 0 0 0 0 0 0 0 14 0 96 40 6 18\n");
  ASSERT_EQ(parsed.devices.size(), 2u);
  const auto r = collectors::computeDiskRates(parsed.devices[0], parsed.devices[1], 1.0);
  ASSERT_TRUE(r.rates);
  EXPECT_DOUBLE_EQ(*r.rates->discards_per_second, 4.0);
  EXPECT_DOUBLE_EQ(*r.rates->d_await_ms, 5.0);
  EXPECT_DOUBLE_EQ(*r.rates->flushes_per_second, 2.0);
  EXPECT_DOUBLE_EQ(*r.rates->f_await_ms, 5.0);
}

TEST(DiskstatsCollector, EmitsOneSamplePerDeviceFromTheSecondReading) {
  testing::ScratchDir dir;
  const auto file = dir.path() / "proc" / "diskstats";
  testing::writeFile(file,
                     "8 0 sda 100 0 800 50 0 0 0 0 0 100 50\n7 0 loop0 0 0 0 0 0 0 0 0 0 0 0\n");
  auto collector = makeDiskstatsCollector(SystemRoot::under(dir.path()));
  SampleBatch first;
  EXPECT_EQ(collector->collect({0, 0}, first).outcome, Outcome::kNoData);
  EXPECT_TRUE(first.disks.empty());
  testing::writeFile(file,
                     "8 0 sda 110 0 880 80 0 0 0 0 0 600 80\n7 0 loop0 0 0 0 0 0 0 0 0 0 0 0\n");
  SampleBatch second;
  EXPECT_EQ(collector->collect({1'000'000'000, 1000}, second).outcome, Outcome::kData);
  // loop0 never did any I/O: no sample (no DB rows, no metric series) until it does.
  ASSERT_EQ(second.disks.size(), 1u);
  EXPECT_EQ(second.disks[0].device, "sda");
  EXPECT_DOUBLE_EQ(*second.disks[0].rates.r_await_ms, 3.0);
  EXPECT_DOUBLE_EQ(second.disks[0].rates.util_percent, 50.0);
  testing::writeFile(file,
                     "8 0 sda 110 0 880 80 0 0 0 0 0 600 80\n7 0 loop0 4 0 32 2 0 0 0 0 0 2 2\n");
  SampleBatch third;
  collector->collect({2'000'000'000, 2000}, third);
  ASSERT_EQ(third.disks.size(), 2u);
  EXPECT_FALSE(third.disks[0].rates.r_await_ms);  // sda idle this interval: no await, not 0
  EXPECT_EQ(third.disks[1].device, "loop0");
  EXPECT_DOUBLE_EQ(*third.disks[1].rates.r_await_ms, 0.5);
}

// A host whose devices are mostly idle (loop devices with nothing attached): the list once, then
// the used device's own stat file for nine ticks, then the list again, where a loop device that
// started its first I/O meanwhile is found with a rate over the time since the list showed it idle.
class DiskstatsFromFiles : public ::testing::Test {
 protected:
  // A diskstats line's counters after the name: READS reads of 8 sectors, 2 ms each.
  static std::string counters(uint64_t reads) {
    return std::to_string(reads) + " 0 " + std::to_string(reads * 8) + " " +
           std::to_string(reads * 2) + " 0 0 0 0 0 " + std::to_string(reads) + " " +
           std::to_string(reads * 2) + " 0 0 0 0 0 0";
  }
  void writeList(uint64_t sda, uint64_t loop1) {
    testing::writeFile(dir_.path() / "proc" / "diskstats",
                       "8 0 sda " + counters(sda) + "\n7 0 loop0 " + counters(0) + "\n7 1 loop1 " +
                           counters(loop1) + "\n7 2 loop2 " + counters(0) + "\n");
  }
  void writeStat(const std::string& text) {
    testing::writeFile(dir_.path() / "sys" / "class" / "block" / "sda" / "stat", text + "\n");
  }
  // Tick N (a second apart): its samples by device name, reads per second.
  std::map<std::string, double> tick(int n) {
    SampleBatch batch;
    collector_->collect({n * 1'000'000'000LL, n * 1000LL}, batch);
    std::map<std::string, double> reads;
    for (const auto& d : batch.disks) reads[d.device] = d.rates.reads_per_second;
    return reads;
  }
  testing::ScratchDir dir_;
  std::unique_ptr<Collector> collector_;
};

TEST_F(DiskstatsFromFiles, TheUsedDevicesFilesBetweenReadingsOfTheList) {
  writeList(100, 0);
  writeStat(counters(100));
  collector_ = makeDiskstatsCollector(SystemRoot::under(dir_.path()));
  EXPECT_TRUE(tick(0).empty());
  // The list is not read again before the tenth tick: what it says meanwhile is not seen.
  writeList(5000, 0);
  for (int n = 1; n < 10; ++n) {
    writeStat(counters(100 + 10 * static_cast<uint64_t>(n)));
    const auto reads = tick(n);
    ASSERT_EQ(reads.size(), 1u) << n;
    EXPECT_DOUBLE_EQ(reads.at("sda"), 10.0) << n;
  }
  // Tick 10 reads the list: loop1 did its first 20 reads since tick 0, seen over those 10 s.
  writeList(200, 20);
  const auto reads = tick(10);
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_DOUBLE_EQ(reads.at("sda"), 10.0);
  EXPECT_DOUBLE_EQ(reads.at("loop1"), 2.0);
  // Two used devices of four, more than a quarter: the list every tick.
  writeList(230, 30);
  const auto next = tick(11);
  EXPECT_DOUBLE_EQ(next.at("sda"), 30.0);
  EXPECT_DOUBLE_EQ(next.at("loop1"), 10.0);
  EXPECT_NE(collector_->finalReport().find("9 ticks from the used devices' stat files"),
            std::string::npos)
      << collector_->finalReport();
}

// A file that fails hands its tick to the list, and the ticks after it until the list's next
// try (not a failed read a tick); a new device tree has the list read at the next tick.
TEST_F(DiskstatsFromFiles, AFileThatFailsOrANewTreeHandsTheTickToTheList) {
  writeList(100, 0);
  writeStat(counters(100));
  collector_ = makeDiskstatsCollector(SystemRoot::under(dir_.path()));
  tick(0);
  writeStat(counters(110));
  writeList(120, 0);
  EXPECT_DOUBLE_EQ(tick(1).at("sda"), 10.0);  // the file
  writeStat("not a device's counters");
  writeList(150, 0);
  EXPECT_DOUBLE_EQ(tick(2).at("sda"), 40.0);  // the list, from the file's 110
  writeStat(counters(999));
  writeList(160, 0);
  EXPECT_DOUBLE_EQ(tick(3).at("sda"), 10.0);  // the list still

  collector_ = makeDiskstatsCollector(SystemRoot::under(dir_.path()));
  tick(10);
  writeStat(counters(170));
  EXPECT_DOUBLE_EQ(tick(11).at("sda"), 10.0);  // the file
  collector_->setDeviceTree(std::make_shared<const DeviceTree>());
  writeStat(counters(999));
  writeList(200, 0);
  EXPECT_DOUBLE_EQ(tick(12).at("sda"), 30.0);  // the list: the tree changed
}

// Once the list is read every tick again, what it said while the files were read is forgotten: a
// device that goes and comes back later starts anew, not from a reading of long ago.
TEST_F(DiskstatsFromFiles, BackToTheListTheOldListIsForgotten) {
  const auto list = [&](uint64_t sda, uint64_t loops, bool with_loop2, uint64_t loop2) {
    std::string text = "8 0 sda " + counters(sda) + "\n";
    for (int n = 0; n < 7; ++n) {
      if (n == 2 && !with_loop2) continue;
      text += "7 " + std::to_string(n) + " loop" + std::to_string(n) + " " +
              counters(n == 2  ? loop2
                       : n < 2 ? loops
                               : 0) +
              "\n";
    }
    testing::writeFile(dir_.path() / "proc" / "diskstats", text);
  };
  list(100, 0, true, 0);
  writeStat(counters(100));
  collector_ = makeDiskstatsCollector(SystemRoot::under(dir_.path()));
  tick(0);
  writeStat(counters(110));
  EXPECT_DOUBLE_EQ(tick(1).at("sda"), 10.0);  // the file: 1 of 8 used
  collector_->setDeviceTree(std::make_shared<const DeviceTree>());
  list(120, 4, true, 0);  // loop0 and loop1 used: 3 of 8, the list from now on
  const auto second = tick(2);
  EXPECT_DOUBLE_EQ(second.at("loop0"), 2.0);  // over the 2 s since the list at tick 0
  list(130, 4, false, 0);
  tick(3);
  list(140, 4, true, 50);  // loop2 back, counting from a new start
  const auto fourth = tick(4);
  EXPECT_EQ(fourth.count("loop2"), 0u);
  EXPECT_DOUBLE_EQ(fourth.at("sda"), 10.0);
  list(150, 4, true, 60);
  EXPECT_DOUBLE_EQ(tick(5).at("loop2"), 10.0);
}

TEST_F(DiskstatsFromFiles, AListOfMostlyUsedDevicesIsReadEveryTick) {
  testing::writeFile(dir_.path() / "proc" / "diskstats", "8 0 sda " + counters(100) +
                                                             "\n7 0 loop0 " + counters(0) +
                                                             "\n8 16 sdb " + counters(5) + "\n");
  writeStat(counters(100));
  testing::writeFile(dir_.path() / "sys" / "class" / "block" / "sdb" / "stat", counters(5));
  collector_ = makeDiskstatsCollector(SystemRoot::under(dir_.path()));
  tick(0);
  testing::writeFile(dir_.path() / "proc" / "diskstats", "8 0 sda " + counters(103) +
                                                             "\n7 0 loop0 " + counters(0) +
                                                             "\n8 16 sdb " + counters(5) + "\n");
  EXPECT_DOUBLE_EQ(tick(1).at("sda"), 3.0);
  EXPECT_EQ(collector_->finalReport(), "");
}

TEST(DiskstatsParse, ADevicesStatIsAListLineWithoutItsName) {
  DiskStats d;
  ASSERT_TRUE(
      parseDeviceStat("     912      3    7296    1204    88     0   704   12   2   1310   1216   "
                      "0 0 0 0 40 9\n",
                      d));
  EXPECT_EQ(d.reads_completed, 912u);
  EXPECT_EQ(d.read_time_ms, 1204u);
  EXPECT_EQ(d.in_flight, 2u);
  EXPECT_EQ(d.flushes_completed, 40u);
  EXPECT_EQ(d.flush_time_ms, 9u);
  EXPECT_FALSE(parseDeviceStat("1 2 3 4 5 6 7 8 9 10\n", d));  // 10 fields: no kernel's
  EXPECT_FALSE(parseDeviceStat("1 2 3 x 5 6 7 8 9 10 11\n", d));
}

TEST(DiskstatsCollector, MissingFileIsAnErrorNotACrash) {
  testing::ScratchDir dir;
  auto collector = makeDiskstatsCollector(SystemRoot::under(dir.path()));
  SampleBatch batch;
  const auto r = collector->collect({0, 0}, batch);
  EXPECT_EQ(r.outcome, Outcome::kError);
  EXPECT_NE(r.message.find("diskstats"), std::string::npos);
}

}  // namespace
}  // namespace stallwatch::collectors
