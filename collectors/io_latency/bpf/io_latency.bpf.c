// SPDX-License-Identifier: GPL-2.0
// Per-I/O latency on the block layer (issue 33): each request's time from its allocation (or its
// issue, where the kernel kept no allocation time) to its completion, and its service time from
// issue to completion, into log-linear histograms keyed by device, operation and the cgroup
// whose I/O it is. Read and reset by the agent every interval; no per-I/O event leaves the
// kernel. Compiled once with clang (CO-RE: field offsets relocated at load against the running
// kernel's BTF) and embedded in the agent as a skeleton.
// The kernel's types first: libbpf's headers use them (not formatted by clang-format, which
// would sort this after them).
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "collectors/io_latency/io_latency_abi.h"

char LICENSE[] SEC("license") = "GPL";

// Requests in flight, by address: bounded; a request that finds it full is not measured and is
// counted.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SW_IO_MAX_IN_FLIGHT);
  __type(key, __u64);
  __type(value, struct sw_io_issued);
} in_flight SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, SW_IO_MAX_KEYS);
  __type(key, struct sw_io_key);
  __type(value, struct sw_io_hist);
} histograms SEC(".maps");

// [0] requests not measured (in_flight full), [1] completions not counted (histograms full).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

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

static __always_inline __u64 cgroup_of(struct request* rq) {
  struct bio* bio = BPF_CORE_READ(rq, bio);
  if (!bio) return 0;
  if (!bpf_core_field_exists(bio->bi_blkg)) return 0;
  struct blkcg_gq* blkg = BPF_CORE_READ(bio, bi_blkg);
  if (!blkg) return 0;
  return BPF_CORE_READ(blkg, blkcg, css.cgroup, kn, id);
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
  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  const int worker = (BPF_CORE_READ(task, flags) & SW_PF_KTHREAD) != 0;
  struct sw_io_issued i = {.start_ns = bpf_ktime_get_ns(),
                           .issue_ns = 0,
                           .cgroup = worker ? cgroup_of(rq) : bpf_get_current_cgroup_id()};
  __u64 key = (__u64)rq;
  if (bpf_map_update_elem(&in_flight, &key, &i, BPF_ANY) != 0) count_dropped(0);
  return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_issue, struct request* rq) {
  const __u64 now = bpf_ktime_get_ns();
  __u64 key = (__u64)rq;
  struct sw_io_issued* known = bpf_map_lookup_elem(&in_flight, &key);
  if (known) {
    known->issue_ns = now;
    return 0;
  }
  // No start seen (an older kernel, a request started before the program): its allocation
  // time where the kernel kept one, its cgroup from the bio's blkcg.
  const __u64 start = BPF_CORE_READ(rq, start_time_ns);
  struct sw_io_issued i = {
      .start_ns = start && start < now ? start : now, .issue_ns = now, .cgroup = cgroup_of(rq)};
  if (bpf_map_update_elem(&in_flight, &key, &i, BPF_ANY) != 0) count_dropped(0);
  return 0;
}

SEC("tp_btf/block_rq_requeue")
int BPF_PROG(on_requeue, struct request* rq) {
  __u64 key = (__u64)rq;
  bpf_map_delete_elem(&in_flight, &key);
  return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_complete, struct request* rq, blk_status_t error, unsigned int nr_bytes) {
  __u64 key = (__u64)rq;
  struct sw_io_issued* i = bpf_map_lookup_elem(&in_flight, &key);
  if (!i) return 0;
  const __u64 now = bpf_ktime_get_ns();
  if (!i->issue_ns) {  // completed without an issue seen (a failed submission): not measured
    bpf_map_delete_elem(&in_flight, &key);
    return 0;
  }
  const __u64 service = now > i->issue_ns ? now - i->issue_ns : 0;
  const __u64 total = now > i->start_ns ? now - i->start_ns : service;
  struct sw_io_key k = {};
  struct block_device* part = BPF_CORE_READ(rq, part);
  if (part) {
    k.dev = BPF_CORE_READ(part, bd_dev);
  } else {
    struct gendisk* disk = BPF_CORE_READ(rq, q, disk);
    if (disk)
      k.dev = ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
  }
  const __u32 op = BPF_CORE_READ(rq, cmd_flags) & 0xff;
  k.op = op <= 3 ? op : SW_IO_OP_OTHER;
  k.cgroup = i->cgroup;
  bpf_map_delete_elem(&in_flight, &key);
  struct sw_io_hist* h = bpf_map_lookup_elem(&histograms, &k);
  if (!h) {
    static const struct sw_io_hist zero = {};
    if (bpf_map_update_elem(&histograms, &k, &zero, BPF_NOEXIST) != 0 &&
        bpf_map_lookup_elem(&histograms, &k) == 0) {
      count_dropped(1);
      return 0;
    }
    h = bpf_map_lookup_elem(&histograms, &k);
    if (!h) return 0;
  }
  __sync_fetch_and_add(&h->count, 1);
  __sync_fetch_and_add(&h->total_ns, total);
  __sync_fetch_and_add(&h->service_ns, service);
  __sync_fetch_and_add(&h->latency[bounded(slot_of(total / 1000))], 1);
  __sync_fetch_and_add(&h->service[bounded(slot_of(service / 1000))], 1);
  return 0;
}
