#pragma once
// The per-I/O latency histograms of the eBPF collector
// (collectors/io_latency/bpf/io_latency.bpf.c), on this side: what each slot holds, percentiles
// from slots, and the compact text the DB keeps. Slots 0..7 hold 0..7 us as they are; from 8 us on,
// each power of two is cut in 8 linear steps (a step is at most 1/8 of its values: a percentile
// read within about 6 %).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stallwatch::model {

inline constexpr size_t kIoLatencySlots = 256;
using IoLatencySlots = std::array<uint64_t, kIoLatencySlots>;

// The slot of a latency of US microseconds (the BPF program's rule).
size_t ioLatencySlot(uint64_t us);
// The microseconds slot SLOT covers: [low, high).
double ioLatencySlotLow(size_t slot);
double ioLatencySlotHigh(size_t slot);

// The Q-quantile (0..1) in milliseconds of the I/Os counted in SLOTS, interpolated within its
// slot; nullopt for none.
std::optional<double> ioLatencyQuantileMs(const IoLatencySlots& slots, double q);

// "slot:count" pairs of the slots that counted, comma separated; and back (malformed pairs
// skipped).
std::string encodeIoLatencySlots(const IoLatencySlots& slots);
void addEncodedIoLatencySlots(std::string_view text, IoLatencySlots& into);

// One device's I/Os of one operation over a span, told by whose they were: one job's own and
// everyone else's (the live correlator and a recording's reader add rows into it alike).
struct IoLatencySplit {
  IoLatencySlots job{}, others{};
  uint64_t job_count = 0, others_count = 0;
  void add(bool the_jobs, uint64_t count, std::string_view encoded_slots);
};

}  // namespace stallwatch::model
