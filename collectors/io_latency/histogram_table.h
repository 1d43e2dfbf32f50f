#pragma once
// The per-I/O program's histograms as the agent reads them (issue 47): arrays the program claims
// slots of in place and never resets (collectors/io_latency/bpf/io_latency.bpf.c), mapped into the
// agent, so each tick takes the difference from what it read the tick before. Slots idle for a
// while are given back for other keys. No libbpf here: the tests hand it plain memory.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "collectors/io_latency/io_latency_abi.h"

namespace stallwatch::collectors {

// The program's two arrays, SW_IO_MAX_KEYS entries each.
struct HistogramArrays {
  sw_io_key_slot* keys = nullptr;
  sw_io_hist* hists = nullptr;
};

class HistogramTable {
 public:
  // A slot given back after this many reads without a completion (an interval each: a job's
  // cgroup that ended, a device gone), or after two where over half the slots are held.
  static constexpr uint32_t kIdleReadsBeforeFree = 60;

  // One slot's completions since the last read (a key may hold two slots: add them up).
  using Visit = std::function<void(const sw_io_key& key, const sw_io_hist& since_last)>;

  // Reads ARRAYS: CLAIMS is the program's count of slots claimed (new keys are looked for only
  // when it moved); VISIT is called for each slot with completions since the last read, unless
  // BASELINE_ONLY (the first read: its counts cover no interval).
  void read(HistogramArrays arrays, uint64_t claims, bool baseline_only, const Visit& visit);

  size_t held() const { return known_.size(); }
  uint64_t freed() const { return freed_; }

 private:
  void findNewKeys(const HistogramArrays& arrays, uint64_t claims);
  // Zeroes SLOT and gives it back to the program (the caller forgets it).
  void free(const HistogramArrays& arrays, uint32_t slot);

  struct Known {
    sw_io_key key;
    sw_io_hist last;  // the counts at the last read (zeros when the slot was found claimed)
    uint32_t idle_reads = 0;
  };
  std::map<uint32_t, Known> known_;  // by slot
  uint64_t claims_seen_ = UINT64_MAX;
  uint64_t freed_ = 0;
};

}  // namespace stallwatch::collectors
