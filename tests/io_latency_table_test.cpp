// The per-I/O program's histogram slots as the agent reads them (collectors/io_latency/
// histogram_table.h): the arrays here are plain memory, filled the way the program fills them.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <vector>

#include "collectors/io_latency/histogram_table.h"
#include "collectors/io_latency/start_tracing.h"

namespace stallwatch::collectors {
namespace {

sw_io_key keyOf(uint32_t dev, uint32_t op, uint64_t cgroup) {
  sw_io_key k{};
  k.dev = dev;
  k.op = op;
  k.cgroup = cgroup;
  return k;
}

// K's tag and the slot the program tries first for it.
std::pair<uint64_t, uint32_t> firstSlotOf(const sw_io_key& k) {
  const uint64_t tag = sw_io_tag(k.dev, k.op, k.cgroup);
  return {tag, static_cast<uint32_t>(tag >> (64 - SW_IO_KEY_BITS))};
}

bool operator==(const sw_io_key& a, const sw_io_key& b) {
  return a.dev == b.dev && a.op == b.op && a.cgroup == b.cgroup;
}

// What the program does (io_latency.bpf.c's histogram_of), single-threaded.
class Program {
 public:
  Program() : keys_(SW_IO_MAX_KEYS), hists_(SW_IO_MAX_KEYS) {}
  HistogramArrays arrays() { return {keys_.data(), hists_.data()}; }
  uint64_t claims() const { return claims_; }

  // The slot K's completions go to, claimed if it holds none.
  uint32_t slotOf(const sw_io_key& k) {
    auto [tag, s] = firstSlotOf(k);
    for (int way = 0; way < SW_IO_KEY_WAYS; ++way) {
      if (keys_[s].tag == tag && keys_[s].key == k) return s;
      if (keys_[s].tag == 0) return claim(s, tag, k);
      s = (s + 1) & (SW_IO_MAX_KEYS - 1);
    }
    ADD_FAILURE() << "no slot";
    return 0;
  }
  // Claims S for K, as a completion of K on another CPU does while the first claimer is still
  // writing its key; KEY_WRITTEN false leaves it half-written.
  uint32_t claim(uint32_t s, uint64_t tag, const sw_io_key& k, bool key_written = true) {
    keys_[s].tag = tag;
    if (key_written) keys_[s].key = k;
    ++claims_;
    return s;
  }
  void complete(uint32_t slot, uint64_t us, uint64_t n = 1) {
    hists_[slot].total_ns += us * 1000 * n;
    hists_[slot].service_ns += us * 500 * n;
    hists_[slot].latency[us < 8 ? us : 8] += static_cast<__u32>(n);
  }
  sw_io_key_slot& owner(uint32_t s) { return keys_[s]; }
  sw_io_hist& hist(uint32_t s) { return hists_[s]; }

 private:
  std::vector<sw_io_key_slot> keys_;
  std::vector<sw_io_hist> hists_;
  uint64_t claims_ = 0;
};

// Each key's completions and summed total time (ns) in one read.
using Pair = std::pair<uint64_t, uint64_t>;
using Read = std::map<std::tuple<uint32_t, uint32_t, uint64_t>, Pair>;
Read readOnce(HistogramTable& table, Program& p, bool baseline_only = false) {
  Read out;
  table.read(p.arrays(), p.claims(), baseline_only, [&](const sw_io_key& k, const sw_io_hist& h) {
    auto& [count, total] = out[{k.dev, k.op, k.cgroup}];
    for (uint64_t c : h.latency) count += c;
    total += h.total_ns;
  });
  return out;
}

TEST(IoLatencyTable, EachReadReportsTheCompletionsSinceTheLastAndTheFirstOnlyTakesBaselines) {
  Program p;
  HistogramTable table;
  const sw_io_key a = keyOf(8 << 20, 0, 42), b = keyOf(259 << 20 | 1, 1, 0);
  p.complete(p.slotOf(a), 3, 10);  // before the agent's first read: covers no interval
  EXPECT_TRUE(readOnce(table, p, /*baseline_only=*/true).empty());
  p.complete(p.slotOf(a), 5, 2);
  p.complete(p.slotOf(b), 100, 7);
  Read r = readOnce(table, p);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[std::make_tuple(a.dev, a.op, a.cgroup)], Pair(2, 10'000));
  EXPECT_EQ(r[std::make_tuple(b.dev, b.op, b.cgroup)], Pair(7, 700'000));
  // Nothing new: nothing reported; then only what came since.
  EXPECT_TRUE(readOnce(table, p).empty());
  p.complete(p.slotOf(b), 100, 1);
  r = readOnce(table, p);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->second.first, 1u);
  EXPECT_EQ(table.held(), 2u);
}

TEST(IoLatencyTable, AKeyStillBeingWrittenIsReadLaterWithEveryCompletionSinceItsClaim) {
  Program p;
  HistogramTable table;
  readOnce(table, p, true);
  const sw_io_key k = keyOf(7 << 20 | 3, 0, 99);
  const auto [tag, s] = firstSlotOf(k);
  p.claim(s, tag, k, /*key_written=*/false);
  p.complete(s, 4, 3);
  EXPECT_TRUE(readOnce(table, p).empty());  // its key does not match its tag yet
  p.owner(s).key = k;
  p.complete(s, 4, 1);
  const Read r = readOnce(table, p);  // the claims count has not moved since: looked for again
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->second.first, 4u);
}

TEST(IoLatencyTable, OneKeyInTwoSlotsIsReportedFromBoth) {
  // Two completions of one new key on two CPUs: the second found the first's slot still without
  // its key and claimed the next.
  Program p;
  HistogramTable table;
  readOnce(table, p, true);
  const sw_io_key k = keyOf(8 << 20 | 16, 1, 5);
  const auto [tag, s] = firstSlotOf(k);
  p.claim(s, tag, k);
  p.claim((s + 1) & (SW_IO_MAX_KEYS - 1), tag, k);
  p.complete(s, 2, 5);
  p.complete((s + 1) & (SW_IO_MAX_KEYS - 1), 2, 6);
  uint64_t count = 0;
  table.read(p.arrays(), p.claims(), false, [&](const sw_io_key& got, const sw_io_hist& h) {
    EXPECT_TRUE(got == k);
    for (uint64_t c : h.latency) count += c;
  });
  EXPECT_EQ(count, 11u);
}

TEST(IoLatencyTable, AnIdleSlotIsGivenBackZeroedAndItsNextKeyCountsFromNothing) {
  Program p;
  HistogramTable table;
  readOnce(table, p, true);
  const sw_io_key gone = keyOf(8 << 20, 0, 1234);  // a job's cgroup that ended
  const uint32_t s = p.slotOf(gone);
  p.complete(s, 6, 4);
  ASSERT_EQ(readOnce(table, p).size(), 1u);
  for (uint32_t i = 1; i < HistogramTable::kIdleReadsBeforeFree; ++i) readOnce(table, p);
  EXPECT_EQ(table.held(), 1u);
  EXPECT_NE(p.owner(s).tag, 0u);
  readOnce(table, p);
  EXPECT_EQ(table.held(), 0u);
  EXPECT_EQ(table.freed(), 1u);
  EXPECT_EQ(p.owner(s).tag, 0u);
  EXPECT_EQ(p.hist(s).latency[6], 0u);
  EXPECT_EQ(p.hist(s).total_ns, 0u);
  // A new key claiming the same slot: only its own completions.
  const sw_io_key next = keyOf(8 << 20, 0, 1234);
  ASSERT_EQ(p.slotOf(next), s);
  p.complete(s, 1, 2);
  const Read r = readOnce(table, p);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r.begin()->second, Pair(2, 2'000));
}

TEST(IoLatencyTable, KeysAreLookedForOnlyWhenTheProgramClaimedASlot) {
  Program p;
  HistogramTable table;
  readOnce(table, p, true);
  const sw_io_key k = keyOf(8 << 20, 0, 7);
  const auto [tag, s] = firstSlotOf(k);
  p.owner(s).tag = tag;  // claimed without the count moving: not looked for
  p.owner(s).key = k;
  p.complete(s, 2, 1);
  EXPECT_TRUE(readOnce(table, p).empty());
  p.claim((s + 7) & (SW_IO_MAX_KEYS - 1), sw_io_tag(1, 1, 1), keyOf(1, 1, 1));
  EXPECT_EQ(readOnce(table, p).size(), 1u);  // found now, with its completion
}

TEST(IoLatencyStarts, NeededTheyAreTracedAtOnceAndLeftOnlyAfterTenTicksWithoutNeed) {
  StartTracing t;
  using Act = StartTracing::Act;
  EXPECT_EQ(t.tick(true, false), Act::kAttach);
  EXPECT_EQ(t.tick(true, true), Act::kKeep);
  for (uint32_t i = 1; i < StartTracing::kUnneededTicksBeforeDetach; ++i)
    EXPECT_EQ(t.tick(false, true), Act::kKeep) << i;
  EXPECT_EQ(t.tick(false, true), Act::kDetach);
  EXPECT_EQ(t.tick(false, false), Act::kKeep);
  EXPECT_EQ(t.tick(true, false), Act::kAttach);
}

TEST(IoLatencyStarts, AFloodOfShortJobsWithoutTheControllerDoesNotDetachThemEveryGap) {
  // A job without the io controller every five ticks, each gone after two: attached once, never
  // detached between them.
  StartTracing t;
  bool attached = false;
  int attaches = 0, detaches = 0;
  for (int tick = 0; tick < 200; ++tick) {
    const auto act = t.tick(tick % 5 < 2, attached);
    if (act == StartTracing::Act::kAttach) ++attaches, attached = true;
    if (act == StartTracing::Act::kDetach) ++detaches, attached = false;
  }
  EXPECT_EQ(attaches, 1);
  EXPECT_EQ(detaches, 0);
}

// How a completion alone tells a followed job's requests: their bios while every job's cgroups
// have io; their first pages' memory cgroups while some lack io but every one has memory (a login
// session's scope, a launcher's unit); else each request's start is traced.
TEST(IoLatencyStarts, TheOwnersSourceIsTheBioThenThePagesThenTheStarts) {
  const auto job = [](const char* key, uint64_t id, bool io, bool memory) {
    JobSample j;
    j.key = key;
    j.cgroup_ids = {id};
    j.cgroups_have_io = io;
    j.cgroups_have_memory = memory;
    return j;
  };
  JobSample in_root;
  in_root.key = "pid:1:1";  // no cgroup of its own: nobody's job, tagged or not
  const JobSample pod = job("cgroup:/kubepods/pod1", 101, true, true);
  const JobSample session = job("cgroup:/user.slice/session-3.scope", 202, false, true);
  const JobSample bare = job("cgroup:/bare", 303, false, false);
  const JobSample io_only = job("cgroup:/io-only", 404, true, false);

  EXPECT_EQ(ownerSourceFor({}).kind, OwnerSource::kBio);
  const OwnerSource bio = ownerSourceFor({in_root, pod, io_only});
  EXPECT_EQ(bio.kind, OwnerSource::kBio);
  EXPECT_EQ(bio.without_io, nullptr);

  const std::vector<JobSample> with_session = {in_root, pod, session};
  const OwnerSource pages = ownerSourceFor(with_session);
  EXPECT_EQ(pages.kind, OwnerSource::kPages);
  ASSERT_NE(pages.without_io, nullptr);
  EXPECT_EQ(pages.without_io->key, session.key);
  EXPECT_EQ(pages.without_memory, nullptr);

  // A job whose cgroup has neither: its requests are told only at their start.
  const std::vector<JobSample> with_bare = {pod, session, bare};
  const OwnerSource starts = ownerSourceFor(with_bare);
  EXPECT_EQ(starts.kind, OwnerSource::kStarts);
  EXPECT_EQ(starts.without_io->key, session.key);
  EXPECT_EQ(starts.without_memory->key, bare.key);
  // Nor do the pages serve where another job's cgroup lacks memory: its pages name an ancestor.
  const std::vector<JobSample> mixed = {io_only, session};
  const OwnerSource neither = ownerSourceFor(mixed);
  EXPECT_EQ(neither.kind, OwnerSource::kStarts);
  EXPECT_EQ(neither.without_io->key, session.key);
  EXPECT_EQ(neither.without_memory->key, io_only.key);
}

}  // namespace
}  // namespace stallwatch::collectors
