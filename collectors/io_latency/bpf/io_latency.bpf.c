// SPDX-License-Identifier: GPL-2.0
// Per-I/O latency on the block layer (issue 33): each request's time from its start (or its
// issue, where the kernel has no start tracepoint) to its completion, into log-linear histograms
// keyed by device, operation and the cgroup whose I/O it is, with the sums of those times and of
// the service times from issue to completion. One program on a request's path (its completion)
// where the kernel's stamps and the bio's cgroup, or its first page's memory cgroup, tell whose
// it is; two where a followed job needs its start traced (issue 47). Read by the agent every
// interval through a memory map; no per-I/O event leaves the kernel. Compiled once with clang
// (CO-RE: field offsets relocated at load against the running kernel's BTF) and embedded in the
// agent as a skeleton.
// The kernel's types first: libbpf's headers use them (not formatted by clang-format, which
// would sort this after them).
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "collectors/io_latency/io_latency_abi.h"

char LICENSE[] SEC("license") = "GPL";

// Requests in flight, in an array indexed by a hash of the request's address, two ways (its slot
// or the next), each slot claimed with a compare-and-swap of its address and freed at completion.
// It was a hash map: its update and delete were most of the programs' cost (issue 47), where an
// array's lookup is an address computed in place. A request that finds both slots held by
// requests in flight is not measured, and is counted. Mapped by the agent, which empties it
// before it traces starts again (see starts_traced).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, SW_IO_MAX_IN_FLIGHT);
  __type(key, __u32);
  __type(value, struct sw_io_issued);
} in_flight SEC(".maps");

// The histograms, in arrays the agent reads through a memory map: a key's slot claimed in place
// by its first completion (key_slots) and its counts beside it (histograms), never reset here.
// They were a hash map, read and emptied each tick: its lookup was a fifth of each completion's
// cost (issue 47), where an array's is an address computed in place.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, SW_IO_MAX_KEYS);
  __type(key, __u32);
  __type(value, struct sw_io_key_slot);
} key_slots SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, SW_IO_MAX_KEYS);
  __type(key, __u32);
  __type(value, struct sw_io_hist);
} histograms SEC(".maps");

// The cgroup ids of the memory cgroups that pages' charges named (see page_owner): the chain from
// a charge to its cgroup's id is three calls of bpf_probe_read_kernel, about 20 ns a request on
// a 16-core host (issue 47), where a slot here is an address computed in place. Direct-mapped by
// the charge; an entry that two CPUs wrote at once fails its check and reads as a miss. Emptied
// by the agent when the followed jobs' cgroups change: a freed memory cgroup's address may be
// a new one's.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, SW_MEMCG_SLOTS);
  __type(key, __u32);
  __type(value, struct sw_memcg_owner);
} memcg_owners SEC(".maps");

// [0] requests without an in-flight slot (both held: timed from the kernel's stamps once they
// are agreed, else not measured), [1] completions not counted (their key's
// four slots held by others), [2] slots taken over from a request whose completion never came, [3]
// completions without an issue time (the kernel kept none and on_issue was not attached yet), [4]
// and [5] the kernel's start stamps within 10 us of the programs' clock and further apart, [6]
// histogram slots claimed (the agent looks for new keys only when it moved). Mapped by the agent.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __uint(max_entries, SW_IO_DROPPED_KINDS);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

// Set by the agent once the kernel's own start stamps have agreed with the programs' clock
// (see on_complete): from then on on_io_start reads no clock (issue 47).
__u32 kernel_start_agreed = 0;

// Set by the agent while a program that claims in-flight slots is attached (on_io_start, or
// on_issue). Once the kernel's start stamps are agreed and every followed job's cgroup has the
// io controller (so a request's bio names the cgroup whose I/O it is), the agent detaches
// on_io_start: on_complete alone then times each request from the kernel's stamps, one program a
// request where there were two (issue 47).
__u32 starts_traced = 0;

// Set by the agent while some followed job's cgroup lacks the io controller (its bios name an
// ancestor) but every followed job's has memory: a request then belongs to the memory cgroup
// charged for its first page (see page_owner), so on_complete alone still tells the job's
// requests (issue 47: one program a request, where the start's was traced for them).
__u32 owner_from_pages = 0;

static __always_inline void count_dropped(__u32 which) {
  __u64* v = bpf_map_lookup_elem(&dropped, &which);
  if (v) __sync_fetch_and_add(v, 1);
}

// The slot of a latency in microseconds: 0..7 as they are, then 8 linear steps per power of two
// (each step at most 1/8 of its value: percentiles within about 6 %).
static __always_inline __u32 slot_of(__u64 us) {
  if (us < 8) return (__u32)us;
  __u32 msb = 0;
  __u64 v = us;
  if (v >> 32) {
    v >>= 32;
    msb += 32;
  }
  if (v >> 16) {
    v >>= 16;
    msb += 16;
  }
  if (v >> 8) {
    v >>= 8;
    msb += 8;
  }
  if (v >> 4) {
    v >>= 4;
    msb += 4;
  }
  if (v >> 2) {
    v >>= 2;
    msb += 2;
  }
  if (v >> 1) {
    msb += 1;
  }
  __u32 slot = (msb - 2) * 8 + (__u32)((us >> (msb - 3)) & 7);
  return slot < SW_IO_SLOTS ? slot : SW_IO_SLOTS - 1;
}

// SLOT masked where the verifier sees it (the compiler would drop a mask it can prove idle):
// SW_IO_SLOTS is a power of two and slot_of stays below it.
static __always_inline __u32 bounded(__u32 slot) {
  asm volatile("" : "+r"(slot));
  return slot & (SW_IO_SLOTS - 1);
}

// The programs are BTF-typed (tp_btf): the kernel's structures are read with plain loads, which
// the verifier turns into guarded ones (a NULL on the way reads as 0), not with a helper call
// each as BPF_CORE_READ makes (issue 47). The fields' offsets are still
// relocated at load (vmlinux.h's types carry preserve_access_index).
static __always_inline __u64 cgroup_of(struct request* rq) {
  struct bio* bio = rq->bio;
  if (!bio) return 0;
  if (!bpf_core_field_exists(bio->bi_blkg)) return 0;
  struct blkcg_gq* blkg = bio->bi_blkg;
  if (!blkg) return 0;
  return blkg->blkcg->css.cgroup->kn->id;
}

// The cgroup id of memory cgroup CHARGE: from memcg_owners, else read and kept there.
static __always_inline __u64 owner_of_charge(unsigned long charge) {
  __u32 s = (__u32)((charge * 0x9E3779B97F4A7C15ULL) >> (64 - SW_MEMCG_BITS));
  struct sw_memcg_owner* o = bpf_map_lookup_elem(&memcg_owners, &s);
  if (!o) return 0;
  const __u64 known = o->cgroup;
  if (o->memcg == charge && o->check == sw_memcg_check(charge, known)) return known;
  const struct mem_cgroup* memcg = (const struct mem_cgroup*)charge;
  const __u64 id = BPF_CORE_READ(memcg, css.cgroup, kn, id);
  if (id) {
    o->memcg = charge;
    o->cgroup = id;
    o->check = sw_memcg_check(charge, id);
  }
  return id;
}

// Whether CHARGE, a page's memcg_data, names a memory cgroup: an address in the kernel's half
// without the low bits that flag other charges (kernel memory, slab objects). A tail page of a
// large folio holds none (0), or the folio's own fields (its page count, a small number).
static __always_inline int names_memcg(unsigned long charge) {
  return (long)charge < 0 && !(charge & 3);
}

// The id of the memory cgroup charged for RQ's first page, tagged SW_IO_OWNER_FROM_PAGE (0: none,
// or a charge that is no memory cgroup's). The pages a job's processes read into (page cache
// they brought in, or their own buffers for direct I/O) and write back (pages they dirtied) are
// charged to the cgroup they ran in at the time, where the kernel does it in their context: the
// job's, when its cgroup has the memory controller. A tail page of a large folio names its head,
// which holds the charge: read through bpf_probe_read_kernel, as the verifier types the word that
// says so as a list's pointer (the union's first member).
static __always_inline __u64 page_owner(struct request* rq) {
  struct bio* bio = rq->bio;
  if (!bio || !bio->bi_vcnt) return 0;
  struct page* page = bio->bi_io_vec->bv_page;
  if (!page || !bpf_core_field_exists(page->memcg_data)) return 0;
  unsigned long charge = page->memcg_data;
  if (!names_memcg(charge)) {
    unsigned long head = 0;
    if (bpf_probe_read_kernel(&head, sizeof head, &page->compound_head) || !(head & 1)) return 0;
    const unsigned long at = head - 1 + bpf_core_field_offset(struct page, memcg_data);
    if (bpf_probe_read_kernel(&charge, sizeof charge, (const void*)at) || !names_memcg(charge))
      return 0;
  }
  const __u64 owner = owner_of_charge(charge);
  return owner ? owner | SW_IO_OWNER_FROM_PAGE : 0;
}

// The request's address as a number, offset by the in-flight map's own address (constant while
// the program is loaded): the verifier allows no arithmetic on a BTF pointer but takes the
// difference of two pointers as a plain number for a program that may read kernel addresses
// (CAP_PERFMON), which the agent's already is. A subtraction, where a helper call to copy the
// pointer out cost a call each program (issue 47).
static __always_inline __u64 address_of(const struct request* rq) {
  __u64 a;
  asm volatile("%[a] = %[rq]; %[a] -= %[base]"
               : [a] "=&r"(a)
               : [rq] "r"(rq), [base] "r"(&in_flight));
  return a;
}

// Requests are a few hundred bytes apart in the kernel's per-tag arrays: Fibonacci hashing
// spreads their addresses over the slots.
static __always_inline __u32 slot_of_request(__u64 rq) {
  return (__u32)((rq * 0x9E3779B97F4A7C15ULL) >> (64 - SW_IO_IN_FLIGHT_BITS));
}

// The slot RQ holds, if it holds one.
static __always_inline struct sw_io_issued* held_by(__u64 rq) {
  __u32 s = slot_of_request(rq);
  struct sw_io_issued* v = bpf_map_lookup_elem(&in_flight, &s);
  if (v && v->rq == rq) return v;
  s = (s + 1) & (SW_IO_MAX_IN_FLIGHT - 1);
  v = bpf_map_lookup_elem(&in_flight, &s);
  return v && v->rq == rq ? v : 0;
}

// A slot for RQ at NOW: the one it holds, else a free one, else one held past SW_IO_STALE_NS
// (by a request whose start time is known); none (counted) where both are held by requests in
// flight.
static __always_inline struct sw_io_issued* claim(__u64 rq, __u64 now) {
  __u32 s = slot_of_request(rq);
  for (int way = 0; way < 2; ++way) {
    struct sw_io_issued* v = bpf_map_lookup_elem(&in_flight, &s);
    if (!v) break;
    const __u64 was = v->rq;
    if (was == rq) return v;
    if (was == 0 && __sync_val_compare_and_swap(&v->rq, 0, rq) == 0) return v;
    if (was != 0 && v->start_ns && now > v->start_ns + SW_IO_STALE_NS &&
        __sync_val_compare_and_swap(&v->rq, was, rq) == was) {
      count_dropped(2);
      return v;
    }
    s = (s + 1) & (SW_IO_MAX_IN_FLIGHT - 1);
  }
  count_dropped(0);
  return 0;
}

// K's histogram: the slot that holds K among its four, else a free one claimed (its key written
// after the claim: a completion of the same key meanwhile claims another, which the agent adds
// up); none (counted) where all four hold others.
static __always_inline struct sw_io_hist* histogram_of(const struct sw_io_key* k) {
  const __u64 tag = sw_io_tag(k->dev, k->op, k->cgroup);
  __u32 s = (__u32)(tag >> (64 - SW_IO_KEY_BITS));
  for (int way = 0; way < SW_IO_KEY_WAYS; ++way) {
    struct sw_io_key_slot* owner = bpf_map_lookup_elem(&key_slots, &s);
    if (!owner) break;
    const __u64 held = owner->tag;
    int mine = held == tag && owner->key.dev == k->dev && owner->key.op == k->op &&
               owner->key.cgroup == k->cgroup;
    if (!mine && held == 0 && __sync_val_compare_and_swap(&owner->tag, 0, tag) == 0) {
      owner->key = *k;
      count_dropped(SW_IO_SLOTS_CLAIMED);
      mine = 1;
    }
    if (mine) return bpf_map_lookup_elem(&histograms, &s);
    s = (s + 1) & (SW_IO_MAX_KEYS - 1);
  }
  count_dropped(1);
  return 0;
}

// A kernel thread's task flag (include/linux/sched.h).
#define SW_PF_KTHREAD 0x00200000

// Where the kernel has it (6.5 on): the request's accounting starts in the submitter's
// context, so the submitter's cgroup v2 id is the one whose I/O it is, whatever the hierarchy
// the io controller sits in (a v1 blkio on hybrid hosts). A kernel thread starts requests on
// others' behalf (reads an io.max limit held back, writeback, a loop device's reads of its
// backing file): those carry their owner's cgroup in the bio (on hybrid hosts a v1 blkio
// cgroup, which is no job's: counted as others'). Not loaded where the kernel lacks it.
SEC("tp_btf/block_io_start")
int BPF_PROG(on_io_start, struct request* rq) {
  struct task_struct* task = bpf_get_current_task_btf();
  const int worker = (task->flags & SW_PF_KTHREAD) != 0;
  // The clock now: the request's own start_time_ns is not stamped yet here (on kernels that
  // stamp it at accounting, just after this tracepoint) or is its allocation's, which for a
  // request allocated in a plugged batch was half a millisecond old (issue 47's trial). Once
  // the kernel's stamps have agreed with ours, on_complete reads the kernel's, and this keeps
  // the allocation's (or none) for the slot's one-minute takeover alone (tracing programs may
  // not read the coarse clock).
  const __u64 now = kernel_start_agreed ? rq->start_time_ns : bpf_ktime_get_ns();
  struct sw_io_issued* i = claim(address_of(rq), now);
  if (!i) return 0;
  i->start_ns = now;
  i->issue_ns = 0;
  i->cgroup = worker ? cgroup_of(rq) : bpf_get_current_cgroup_id();
  return 0;
}

// Attached only where it is needed: a kernel without block_io_start (it is then the start), or
// a queue whose requests come without the kernel's issue stamp.
SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_issue, struct request* rq) {
  const __u64 now = bpf_ktime_get_ns();
  struct sw_io_issued* known = held_by(address_of(rq));
  if (known) {
    known->issue_ns = now;
    return 0;
  }
  // No start seen (an older kernel, a request started before the program): its allocation
  // time where the kernel kept one, its cgroup from the bio's blkcg.
  struct sw_io_issued* i = claim(address_of(rq), now);
  if (!i) return 0;
  const __u64 start = rq->start_time_ns;
  i->start_ns = start && start < now ? start : now;
  i->issue_ns = now;
  i->cgroup = cgroup_of(rq);
  return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(on_requeue, struct request* rq) {
  struct sw_io_issued* i = held_by(address_of(rq));
  if (i) i->rq = 0;
  return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_complete, struct request* rq, blk_status_t error, unsigned int nr_bytes) {
  struct sw_io_issued* i = starts_traced ? held_by(address_of(rq)) : 0;
  // Without a slot: a request that started before its start was traced, or every request while
  // on_io_start is detached; timed from the kernel's stamps once they are agreed, its cgroup
  // from its bio.
  if (!i && !kernel_start_agreed) return 0;
  __u64 started = 0, cgroup = 0;
  if (i) {
    started = i->start_ns;
    cgroup = i->cgroup;
  }
  const __u64 now = bpf_ktime_get_ns();
  // After the clock's call, apart from the slot's loads: the compiler would otherwise merge the
  // two into one instruction reading a map value or a kernel structure, which the verifier
  // refuses.
  if (!i) {
    if (owner_from_pages) cgroup = page_owner(rq);
    if (!cgroup) cgroup = cgroup_of(rq);
  }
  // The kernel's stamp of the request's accounting start, where it has one.
  __u64 kernel_start = 0;
  if (bpf_core_enum_value_exists(enum rqf_flags, __RQF_IO_STAT) &&
      (rq->rq_flags & (1U << bpf_core_enum_value(enum rqf_flags, __RQF_IO_STAT))))
    kernel_start = rq->start_time_ns;
  if (!kernel_start_agreed) {
    // Until the agent says they agree: each stamp against ours, within 10 us or not.
    if (kernel_start && started) {
      const __u64 apart = kernel_start > started ? kernel_start - started : started - kernel_start;
      count_dropped(apart <= 10000 ? 4 : 5);
    }
  } else {
    started = kernel_start;  // none (a queue without I/O statistics): from the issue
  }
  // The issue time: the kernel's own where it keeps one (queues with statistics on, which
  // writeback throttling turns on by default: blk_mq_start_request), else on_issue's, which
  // the agent attaches only once a completion came without it (issue 47: one program fewer
  // in the I/O path). The kernel's may come from a time its submitter cached for a plugged
  // batch, a little before our start: never earlier than that.
  __u64 issued = rq->io_start_time_ns;
  if (i) {
    if (!issued) issued = i->issue_ns;
    i->rq = 0;  // free: what the slot held is read
  }
  if (!issued) {
    // Not measured. A request that was never issued (an empty flush the flush machinery
    // answered itself, a failed submission) is left idle, and the kernel stamps no driver's
    // own command (a SMART read, a virtio disk's serial); one that was issued on a queue
    // without the kernel's stamp is counted: the agent then attaches on_issue.
    if (rq->state != MQ_RQ_IDLE && (rq->cmd_flags & 0xff) < REQ_OP_DRV_IN) count_dropped(3);
    return 0;
  }
  if (!started) started = issued;
  if (issued < started) issued = started;
  const __u64 service = now > issued ? now - issued : 0;
  const __u64 total = now > started ? now - started : service;
  struct sw_io_key k = {};
  struct block_device* part = rq->part;
  if (part) {
    k.dev = part->bd_dev;
  } else {
    struct gendisk* disk = rq->q->disk;
    if (disk) k.dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
  }
  const __u32 op = rq->cmd_flags & 0xff;
  k.op = op <= 3 ? op : SW_IO_OP_OTHER;
  k.cgroup = cgroup;
  struct sw_io_hist* h = histogram_of(&k);
  if (!h) return 0;
  // Three atomic adds, where there were five (issue 47): the count is the slots' sum, and the
  // agent reads no histogram of service times.
  __sync_fetch_and_add(&h->total_ns, total);
  __sync_fetch_and_add(&h->service_ns, service);
  __sync_fetch_and_add(&h->latency[bounded(slot_of(total / 1000))], 1);
  return 0;
}
