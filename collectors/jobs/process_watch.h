// The files of one followed process, read every tick at the least cost the kernel allows
// (issue 18: a rank of a hundred threads cost 0.7 ms a tick when every thread's stat was
// opened, read and closed; a job of 8 ranks x 8 workers, 13 ms):
//   - its stat, io and children files and its threads' files stay open; each tick preads them
//     from offset 0, which regenerates a procfs file without the path lookup and open;
//   - a thread's state comes from its stat (2.8 us to generate; the main thread's from the
//     process's stat, read just before, which shows it), but only for threads that ran
//     since the last tick: its schedstat (0.6 us) says whether it did. A thread that did not run
//     cannot have changed its own state, so its last state and wchan still hold. (A thread woken
//     but not yet run keeps its sleep state for that tick: it slept the whole interval.)
//   - most of a rank's threads sleep for good (OpenMP's pool, CUDA's and NCCL's helpers): a
//     thread that has not run for kIdleAfterChecks checks is looked at only every
//     IDLE_CHECK_EVERY ticks (staggered), so a long-idle thread that wakes into a D-state wait is
//     seen up to that many ticks late. Threads that run (a DataLoader worker's, a rank's main
//     one), threads in D and the main thread are looked at every tick.
//   - a thread that ran at each of its last kHotAfterRuns looks (a DataLoader worker's, most of
//     a rank's: 16 of a real rank's 18 threads run every second) is read by its stat alone, its
//     schedstat only every kHotVerifyEvery ticks (staggered) to notice it has stopped: its state
//     is read every tick as before, one read fewer. A hot thread found in D goes back to the
//     schedstat first rule, so its wait is read once, not every tick.
//   - the main thread's wchan is read once it has slept (S) for kSleepingAfterChecks checks,
//     once per sleep: where a process with nothing to do waits, so that a job hung with every
//     thread asleep is said with what it waits on, not as a bare not-storage.
// A tree that is not procfs (a test's fixture) is read afresh every time, every thread's stat
// included. Held descriptors are bounded for the whole agent; past the bound, files are opened
// per read as before.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectors/proc_file.h"
#include "collectors/proc_pid.h"

namespace stallwatch::collectors {

// Thread files this watch has read, for tests and benches.
struct ThreadReads {
  uint64_t schedstat = 0;
  uint64_t stat = 0;
};

struct ThreadStates {
  uint32_t d_state = 0;             // threads in uninterruptible sleep
  std::vector<std::string> wchans;  // where each of them waits (kernel function), if readable
  // Where the main thread sleeps (S), once it has not run for kSleepingAfterChecks checks:
  // where an idle process waits (a lock, a poll, a pipe). "" while it runs or is unreadable.
  std::string main_sleep_wchan;
  // The main thread's cumulative schedstat: time on a CPU and time runnable waiting for one
  // (ns). Read every tick anyway (its sleep is told by it); none without schedstats.
  std::optional<uint64_t> main_run_ns, main_wait_ns;
};

class ProcessWatch {
 public:
  explicit ProcessWatch(std::filesystem::path dir,
                        uint32_t idle_check_every = 1);  // DIR: /proc/PID
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // nullopt once the process has exited: a held descriptor of an exited process reads ESRCH,
  // even after its pid is reused.
  std::optional<ProcStat> stat();
  std::optional<ProcIo> io();  // needs ptrace access: same user or root
  // Children started by its main thread (task/PID/children).
  std::vector<uint32_t> children();
  // Children started by any of its threads that ran since the last call (a thread that has
  // not run cannot have forked): read on discovery ticks, in place of a walk of every process
  // on the host for its parent (the walk cost 20-40 us a process, a rank's stat summing over
  // its threads).
  std::vector<uint32_t> childrenOfThreads();
  // NUM_THREADS, from this tick's stat(): a change, or a thread gone, rescans the task list.
  ThreadStates threadStates(uint32_t num_threads);

  const ThreadReads& reads() const { return reads_; }

  // Descriptors held open by every watch of this agent, and the bound on them.
  static size_t heldDescriptors();
  static size_t descriptorBudget();

 private:
  static constexpr uint32_t kIdleAfterChecks = 10;
  static constexpr uint32_t kSleepingAfterChecks = 2;
  static constexpr uint32_t kHotAfterRuns = 3;
  static constexpr uint32_t kHotVerifyEvery = 4;
  struct Thread {
    uint32_t idle_checks = 0;        // consecutive checks in which it had not run
    uint32_t runs = 0;               // consecutive checks in which it had run (or was hot)
    uint32_t stagger = 0;            // spreads the idle threads' checks over the ticks
    bool ran_since_children = true;  // since the last childrenOfThreads()
    int schedstat_fd = -1;
    int stat_fd = -1;
    std::string schedstat;  // as last read; "" when never read or unreadable
    char state = '?';
    std::string wchan;        // of a thread in D, as read when it last ran
    std::string sleep_wchan;  // of the main thread asleep (S), read once per sleep
  };
  void rescanThreads();
  // Where TID sleeps (a kernel function), "" if unreadable or not asleep.
  std::string readWchan(const std::string& tid);
  void closeThread(Thread& t);
  // One read of TID/NAME into BUFFER: through *HELD if open, else opened, and kept in *HELD
  // within the budget (HELD null: never kept). False if the thread is gone or the file
  // unreadable.
  bool readThreadFile(const std::string& tid, const char* name, int* held, std::string& buffer);

  std::filesystem::path dir_;
  ProcFile stat_, io_, children_;
  int task_fd_ = -1;     // DIR/task
  bool procfs_ = false;  // only procfs files regenerate on pread: fixtures are reopened
  std::map<std::string, Thread> threads_;
  bool rescan_ = true;
  uint32_t idle_check_every_ = 1;
  uint64_t ticks_ = 0;
  std::string main_tid_;  // the main thread's tid: the process's pid
  // The main thread's state from this tick's stat() (a process's stat shows its main thread's
  // state), '?' when stat() was not called since the last threadStates().
  char main_state_ = '?';
  std::string text_, buffer_;
  ThreadReads reads_;
};

}  // namespace stallwatch::collectors
