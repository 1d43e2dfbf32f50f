/* What the per-I/O latency program (collectors/io_latency/bpf/io_latency.bpf.c) and the agent
   share: its maps' keys and values. C, for both compilers. */
#ifndef STALLWATCH_IO_LATENCY_ABI_H
#define STALLWATCH_IO_LATENCY_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Slots 0..7 hold 0..7 us; then 8 linear steps per power of two, up to 2^34 us. */
#define SW_IO_SLOTS 256
/* The in-flight table: 2^16 slots of two ways (a request's slot from its address, or the next). */
#define SW_IO_IN_FLIGHT_BITS 16
#define SW_IO_MAX_IN_FLIGHT (1 << SW_IO_IN_FLIGHT_BITS)
/* A slot held this long (its completion never came: a flush sequence's, a device torn down) is
   taken over by the next request that needs it. */
#define SW_IO_STALE_NS 60000000000ULL
/* The histograms: an array of 2^12 slots, a key's slot from its tag, or one of the next three. */
#define SW_IO_KEY_BITS 12
#define SW_IO_MAX_KEYS (1 << SW_IO_KEY_BITS)
#define SW_IO_KEY_WAYS 4
/* The dropped map's counters (see the program); the last counts the slots claimed. */
#define SW_IO_DROPPED_KINDS 7
#define SW_IO_SLOTS_CLAIMED 6
/* A key's cgroup named by a page's charge: the memory cgroup's id with this bit set (on a hybrid
   host the memory hierarchy is v1's, whose ids may be the io hierarchy's too). */
#define SW_IO_OWNER_FROM_PAGE (1ULL << 63)
/* The memory cgroups' owners seen: 2^8 slots, a charge's slot from its address. */
#define SW_MEMCG_BITS 8
#define SW_MEMCG_SLOTS (1 << SW_MEMCG_BITS)
/* Operations: the kernel's REQ_OP_READ, WRITE, FLUSH, DISCARD; everything else. */
#define SW_IO_OP_OTHER 4

/* A request in flight: its address (0: the slot is free), when it began (its accounting
   started, in the submitter's context; else its allocation, where the kernel kept it), when it
   was issued to the driver (0: not yet, or on_issue not attached: the kernel's own stamp serves),
   and whose it is. */
struct sw_io_issued {
  __u64 rq;
  __u64 start_ns;
  __u64 issue_ns;
  __u64 cgroup;
};

struct sw_io_key {
  __u32 dev; /* the kernel's dev_t: major << 20 | minor */
  __u32 op;
  __u64 cgroup; /* the cgroup v2 id (its directory's inode) whose I/O it is; 0: unknown */
};

/* A histogram slot's owner: the key's tag (0: the slot is free; claimed with a compare-and-swap
   of it, the key written after, so a key whose tag is not its own is still being written). */
struct sw_io_key_slot {
  __u64 tag;
  struct sw_io_key key;
};

/* A key's tag: a mix of its fields, never 0. Its top SW_IO_KEY_BITS pick its first slot. */
static inline __attribute__((always_inline)) __u64 sw_io_tag(__u32 dev, __u32 op, __u64 cgroup) {
  __u64 h = (((__u64)dev << 3) | op) * 0x9E3779B97F4A7C15ULL;
  h ^= cgroup * 0xC2B2AE3D27D4EB4FULL;
  h ^= h >> 29;
  return h | 1;
}

/* A memory cgroup (its address, as a page's charge names it) and its cgroup's id, with a check
   of the two (sw_memcg_check): an entry two CPUs wrote at once holds one that fails. */
struct sw_memcg_owner {
  __u64 memcg;
  __u64 cgroup;
  __u64 check;
};

static inline __attribute__((always_inline)) __u64 sw_memcg_check(__u64 memcg, __u64 cgroup) {
  return memcg ^ (cgroup * 0x9E3779B97F4A7C15ULL);
}

/* One device, operation and cgroup's completions since its slot was claimed (never reset by
   the program: the agent takes differences): their count is the slots' sum. */
struct sw_io_hist {
  __u64 total_ns;   /* allocation (or issue) to completion, summed */
  __u64 service_ns; /* issue to completion, summed */
  /* 32 bits a slot: the agent reads them every interval and takes differences modulo 2^32 (a
     slot would need 4 billion completions an interval to wrap twice); half the memory the
     agent maps (issue 47). */
  __u32 latency[SW_IO_SLOTS];
};

#endif
