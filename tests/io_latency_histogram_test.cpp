// The per-I/O latency histogram's arithmetic (model/io_latency_histogram.h): the slots the
// BPF program fills, percentiles read from them, and the text the DB keeps.
#include "model/io_latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace stallwatch::model {
namespace {

TEST(IoLatencyHistogram, SlotsCoverEveryValueOnceAndInOrder) {
  // Each value falls in the slot whose [low, high) holds it; slots are contiguous.
  for (uint64_t us : {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 17ull, 100ull, 1000ull, 123456ull,
                      10'000'000ull}) {
    const size_t s = ioLatencySlot(us);
    EXPECT_LE(ioLatencySlotLow(s), static_cast<double>(us)) << us;
    EXPECT_GT(ioLatencySlotHigh(s), static_cast<double>(us)) << us;
  }
  for (size_t s = 0; s + 1 < kIoLatencySlots; ++s)
    EXPECT_EQ(ioLatencySlotHigh(s), ioLatencySlotLow(s + 1)) << s;
  // A step is at most 1/8 of its values past 8 us.
  for (size_t s = 8; s < kIoLatencySlots; ++s)
    EXPECT_LE(ioLatencySlotHigh(s) - ioLatencySlotLow(s), ioLatencySlotLow(s) / 8 + 1e-9) << s;
  EXPECT_EQ(ioLatencySlot(~0ull), kIoLatencySlots - 1);  // past the last: the last
}

TEST(IoLatencyHistogram, PercentilesAreWithinSixPercentOfTheExactOnes) {
  // A log-normal spread of latencies around 200 us with a 1 % tail at 150 ms: the histogram's
  // p50, p99 and p99.9 against the sorted values'.
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> body(std::log(200.0), 0.5);
  std::uniform_real_distribution<double> tail(140'000, 160'000);
  std::vector<double> values;
  IoLatencySlots slots{};
  for (int i = 0; i < 100'000; ++i) {
    const double us = i % 100 == 0 ? tail(rng) : body(rng);
    values.push_back(us);
    ++slots[ioLatencySlot(static_cast<uint64_t>(us))];
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.995, 0.999}) {
    const double exact_ms =
        values[static_cast<size_t>(q * static_cast<double>(values.size()))] / 1000;
    const auto read = ioLatencyQuantileMs(slots, q);
    ASSERT_TRUE(read);
    EXPECT_NEAR(*read, exact_ms, exact_ms * 0.06) << q;
  }
  EXPECT_FALSE(ioLatencyQuantileMs(IoLatencySlots{}, 0.5));
}

TEST(IoLatencyHistogram, TheStoredTextComesBackAndBadPairsAreSkipped) {
  IoLatencySlots slots{};
  slots[3] = 5;
  slots[200] = 1;
  const std::string text = encodeIoLatencySlots(slots);
  EXPECT_EQ(text, "3:5,200:1");
  IoLatencySlots back{};
  addEncodedIoLatencySlots(text + ",x:1,999:4,7:,:3,12:2", back);
  EXPECT_EQ(back[3], 5u);
  EXPECT_EQ(back[200], 1u);
  EXPECT_EQ(back[12], 2u);
  uint64_t total = 0;
  for (uint64_t c : back) total += c;
  EXPECT_EQ(total, 8u);
}

}  // namespace
}  // namespace stallwatch::model
