#include "collectors/io_latency/histogram_table.h"

namespace stallwatch::collectors {
namespace {

// The program writes these while the agent reads them: each 64-bit word read or written whole.
__u64 load(const __u64* word) { return __atomic_load_n(word, __ATOMIC_RELAXED); }
uint64_t loadTag(const sw_io_key_slot& slot) {
  return __atomic_load_n(&slot.tag, __ATOMIC_ACQUIRE);
}
void store(__u64* word, __u64 v) { __atomic_store_n(word, v, __ATOMIC_RELAXED); }

// SLOT's counts minus LAST (wrap-around is the right difference), into DELTA; whether any
// completion came.
bool since(const sw_io_hist& slot, const sw_io_hist& last, sw_io_hist& delta, sw_io_hist& now) {
  bool any = false;
  now.total_ns = load(&slot.total_ns);
  now.service_ns = load(&slot.service_ns);
  delta.total_ns = now.total_ns - last.total_ns;
  delta.service_ns = now.service_ns - last.service_ns;
  for (size_t i = 0; i < SW_IO_SLOTS; ++i) {
    now.latency[i] = __atomic_load_n(&slot.latency[i], __ATOMIC_RELAXED);
    delta.latency[i] = now.latency[i] - last.latency[i];  // modulo 2^32: a wrap counts right
    any = any || delta.latency[i] != 0;
  }
  return any;
}

}  // namespace

void HistogramTable::findNewKeys(const HistogramArrays& arrays, uint64_t claims) {
  bool all_read = true;
  for (uint32_t s = 0; s < SW_IO_MAX_KEYS; ++s) {
    const sw_io_key_slot& slot = arrays.keys[s];
    const uint64_t tag = loadTag(slot);
    if (tag == 0 || known_.count(s)) continue;
    sw_io_key key{};
    key.dev = static_cast<uint32_t>(__atomic_load_n(&slot.key.dev, __ATOMIC_RELAXED));
    key.op = static_cast<uint32_t>(__atomic_load_n(&slot.key.op, __ATOMIC_RELAXED));
    key.cgroup = load(&slot.key.cgroup);
    // A key whose tag is not its own is still being written: looked at again next read, and
    // its counts since the claim are all taken then.
    if (sw_io_tag(key.dev, key.op, key.cgroup) != tag) {
      all_read = false;
      continue;
    }
    Known k{};
    k.key = key;
    known_.emplace(s, k);
  }
  if (all_read) claims_seen_ = claims;
}

void HistogramTable::free(const HistogramArrays& arrays, uint32_t slot) {
  sw_io_hist& h = arrays.hists[slot];
  store(&h.total_ns, 0);
  store(&h.service_ns, 0);
  for (__u32& c : h.latency) __atomic_store_n(&c, 0, __ATOMIC_RELAXED);
  sw_io_key_slot& owner = arrays.keys[slot];
  store(&owner.key.cgroup, 0);
  __atomic_store_n(&owner.key.dev, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&owner.key.op, 0, __ATOMIC_RELAXED);
  // Last, and ordered after the zeros: a program that claims the slot finds it empty.
  __atomic_store_n(&owner.tag, 0, __ATOMIC_RELEASE);
  ++freed_;
}

void HistogramTable::read(HistogramArrays arrays, uint64_t claims, bool baseline_only,
                          const Visit& visit) {
  if (claims != claims_seen_) findNewKeys(arrays, claims);
  const bool crowded = known_.size() > SW_IO_MAX_KEYS / 2;
  sw_io_hist delta{}, now{};
  for (auto it = known_.begin(); it != known_.end();) {
    Known& k = it->second;
    if (since(arrays.hists[it->first], k.last, delta, now)) {
      k.idle_reads = 0;
      k.last = now;
      if (!baseline_only) visit(k.key, delta);
    } else if (++k.idle_reads >= (crowded ? 2 : kIdleReadsBeforeFree)) {
      free(arrays, it->first);
      it = known_.erase(it);
      continue;
    }
    ++it;
  }
}

}  // namespace stallwatch::collectors
