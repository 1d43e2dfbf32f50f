#include "correlator/wait_channel.h"

#include <map>

namespace stallwatch::correlator {
namespace {

struct Family {
  const char* prefix;
  const char* subsystem;
};

// First match wins: the specific names before the prefixes that would also take them.
// Sources: the functions that put a task in TASK_UNINTERRUPTIBLE or TASK_KILLABLE in
// fs/fuse/dev.c, net/sunrpc/sched.c, fs/nfs/, mm/page-writeback.c, mm/filemap.c, block/,
// fs/jbd2/, fs/xfs/, mm/vmscan.c (Linux 5.x and 6.x).
constexpr Family kFamilies[] = {
    {"request_wait_answer", "FUSE"},
    {"fuse_", "FUSE"},
    {"rpc_wait_bit_killable", "NFS/RPC"},
    {"__rpc_", "NFS/RPC"},
    {"rpc_", "NFS/RPC"},
    {"nfs", "NFS/RPC"},
    {"wb_wait_for_completion", "writeback"},
    {"balance_dirty_pages", "writeback"},
    {"folio_wait_writeback", "writeback"},
    {"wait_on_page_writeback", "writeback"},
    {"__filemap_fdatawait", "writeback"},
    {"filemap_fdatawait", "writeback"},
    {"writeback_", "writeback"},
    {"jbd2", "journal"},
    {"xlog_", "journal"},
    {"xfs_log_", "journal"},
    {"ext4_", "journal"},
    {"btrfs_", "journal"},
    {"shrink_", "memory reclaim"},
    {"throttle_direct_reclaim", "memory reclaim"},
    {"reclaim_throttle", "memory reclaim"},
    {"__alloc_pages", "memory reclaim"},
    {"congestion_wait", "memory reclaim"},
    {"mempool_alloc", "memory reclaim"},
    {"io_schedule", "block I/O"},
    {"__iomap_dio_rw", "block I/O"},  // O_DIRECT reads and writes on ext4, xfs
    {"iomap_dio", "block I/O"},
    {"folio_wait_bit", "block I/O"},
    {"wait_on_page_bit", "block I/O"},
    {"__folio_lock", "block I/O"},
    {"__lock_page", "block I/O"},
    {"bit_wait_io", "block I/O"},
    {"blk_", "block I/O"},
    {"submit_bio_wait", "block I/O"},
    {"rq_qos_wait", "block I/O"},
    {"wbt_wait", "block I/O"},
    {"blkdev_", "block I/O"},
    {"filemap_", "block I/O"},
    // Interruptible sleeps (S), where an idle process's main thread waits: a job hung with
    // every thread asleep says what it waits for. kernel/futex/, fs/select.c, fs/eventpoll.c,
    // fs/pipe.c, net/unix/af_unix.c, net/core/sock.c, kernel/exit.c, kernel/time/hrtimer.c.
    {"futex_", "lock or condition variable"},
    {"do_sys_poll", "poll on files, pipes or sockets"},
    {"do_select", "poll on files, pipes or sockets"},
    {"core_sys_select", "poll on files, pipes or sockets"},
    {"do_epoll_wait", "poll on files, pipes or sockets"},
    {"ep_poll", "poll on files, pipes or sockets"},
    {"pipe_read", "pipe"},
    {"anon_pipe_read", "pipe"},
    {"pipe_wait", "pipe"},
    {"unix_stream_", "socket"},
    {"unix_dgram_", "socket"},
    {"sk_wait_data", "socket"},
    {"inet_csk_accept", "socket"},
    {"tcp_recvmsg", "socket"},
    {"do_wait", "a child process to exit"},
    {"kernel_wait4", "a child process to exit"},
    {"hrtimer_nanosleep", "timer"},
    {"do_nanosleep", "timer"},
    {"do_sigtimedwait", "signal"},
    {"sigsuspend", "signal"},
};

}  // namespace

const char* waitSubsystem(std::string_view wchan) {
  for (const Family& f : kFamilies) {
    if (wchan.substr(0, std::string_view(f.prefix).size()) == f.prefix) return f.subsystem;
  }
  return "";
}

std::string mostCommonText(const std::vector<std::string>& wchans) {
  std::map<std::string, size_t> counts;
  for (const auto& w : wchans) {
    if (!w.empty()) ++counts[w];
  }
  std::string best;
  size_t best_count = 0;
  for (const auto& [w, n] : counts) {
    if (n > best_count) {
      best = w;
      best_count = n;
    }
  }
  return best;
}

}  // namespace stallwatch::correlator
