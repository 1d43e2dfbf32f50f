#include "model/io_latency_histogram.h"

#include <charconv>

namespace stallwatch::model {

size_t ioLatencySlot(uint64_t us) {
  if (us < 8) return static_cast<size_t>(us);
  const int msb = 63 - __builtin_clzll(us);
  const size_t slot = static_cast<size_t>(msb - 2) * 8 + static_cast<size_t>((us >> (msb - 3)) & 7);
  return slot < kIoLatencySlots ? slot : kIoLatencySlots - 1;
}

double ioLatencySlotLow(size_t slot) {
  if (slot < 8) return static_cast<double>(slot);
  const int msb = static_cast<int>(slot / 8) + 2;
  return static_cast<double>(8 + slot % 8) * static_cast<double>(uint64_t{1} << (msb - 3));
}

double ioLatencySlotHigh(size_t slot) {
  if (slot < 8) return static_cast<double>(slot + 1);
  const int msb = static_cast<int>(slot / 8) + 2;
  return static_cast<double>(9 + slot % 8) * static_cast<double>(uint64_t{1} << (msb - 3));
}

std::optional<double> ioLatencyQuantileMs(const IoLatencySlots& slots, double q) {
  uint64_t n = 0;
  for (uint64_t c : slots) n += c;
  if (n == 0) return std::nullopt;
  const double target = q * static_cast<double>(n);
  double below = 0;
  for (size_t s = 0; s < kIoLatencySlots; ++s) {
    if (slots[s] == 0) continue;
    const auto count = static_cast<double>(slots[s]);
    if (below + count >= target) {
      const double within = count > 0 ? (target - below) / count : 0;
      return (ioLatencySlotLow(s) + within * (ioLatencySlotHigh(s) - ioLatencySlotLow(s))) / 1000;
    }
    below += count;
  }
  return ioLatencySlotHigh(kIoLatencySlots - 1) / 1000;
}

std::string encodeIoLatencySlots(const IoLatencySlots& slots) {
  std::string out;
  for (size_t s = 0; s < kIoLatencySlots; ++s) {
    if (slots[s] == 0) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(s) + ':' + std::to_string(slots[s]);
  }
  return out;
}

void addEncodedIoLatencySlots(std::string_view text, IoLatencySlots& into) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view pair = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const size_t colon = pair.find(':');
    if (colon == std::string_view::npos) continue;
    size_t slot = 0;
    uint64_t count = 0;
    const auto a = std::from_chars(pair.data(), pair.data() + colon, slot);
    const auto b = std::from_chars(pair.data() + colon + 1, pair.data() + pair.size(), count);
    if (a.ec != std::errc() || b.ec != std::errc() || a.ptr != pair.data() + colon ||
        b.ptr != pair.data() + pair.size() || slot >= kIoLatencySlots)
      continue;
    into[slot] += count;
  }
}

void IoLatencySplit::add(bool the_jobs, uint64_t count, std::string_view encoded_slots) {
  addEncodedIoLatencySlots(encoded_slots, the_jobs ? job : others);
  (the_jobs ? job_count : others_count) += count;
}

}  // namespace stallwatch::model
