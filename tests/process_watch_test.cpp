#include "collectors/jobs/process_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <vector>

#include "collectors/proc_pid.h"
#include "collectors/process_reader.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

fs::path self() { return fs::path("/proc") / std::to_string(::getpid()); }

uint32_t threadCount() {
  ProcessWatch watch(self());
  return watch.stat()->num_threads;
}

// A thread that waits for its turn, then makes a vfork-like child (CLONE_VM | CLONE_VFORK, on
// a stack of its own) that sleeps: until the child exits, the thread is in uninterruptible
// sleep ('D' in its stat), as a thread waiting on a disk read is.
class VforkWaiter {
 public:
  explicit VforkWaiter(milliseconds child_sleep) : sleep_(child_sleep), stack_(64 * 1024) {
    thread_ = std::thread([this] {
      {
        std::unique_lock lock(m_);
        cv_.wait(lock, [this] { return go_; });
      }
      const pid_t child = ::clone(&VforkWaiter::child, stack_.data() + stack_.size(),
                                  CLONE_VM | CLONE_VFORK | SIGCHLD, this);
      if (child > 0) ::waitpid(child, nullptr, 0);
      done_ = true;
    });
  }
  ~VforkWaiter() {
    start();
    thread_.join();
  }
  void start() {
    std::lock_guard lock(m_);
    go_ = true;
    cv_.notify_all();
  }
  bool done() const { return done_; }

 private:
  static int child(void* self) {
    const auto* waiter = static_cast<VforkWaiter*>(self);
    const timespec ts{0, static_cast<long>(waiter->sleep_.count()) * 1000000L};
    ::nanosleep(&ts, nullptr);
    ::_exit(0);
  }
  milliseconds sleep_;
  std::vector<char> stack_;
  std::mutex m_;
  std::condition_variable cv_;
  bool go_ = false;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(ProcessWatch, ThreadInUninterruptibleSleepIsCountedUntilItRunsAgain) {
  VforkWaiter waiter(milliseconds(900));
  ProcessWatch watch(self());
  EXPECT_EQ(watch.threadStates(threadCount()).d_state, 0u);

  waiter.start();
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_FALSE(waiter.done());
  const ThreadStates blocked = watch.threadStates(threadCount());
  EXPECT_EQ(blocked.d_state, 1u);
  ASSERT_EQ(blocked.wchans.size(), 1u);
  EXPECT_FALSE(blocked.wchans.front().empty());
  // It has not run since: the state and wait are kept from the last read, not read again.
  const ThreadStates again = watch.threadStates(threadCount());
  EXPECT_EQ(again.d_state, 1u);
  EXPECT_EQ(again.wchans, blocked.wchans);

  while (!waiter.done()) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(watch.threadStates(threadCount()).d_state, 0u);
}

TEST(ProcessWatch, HoldsItsThreadsFilesAndClosesThoseOfThreadsThatExit) {
  const size_t before = ProcessWatch::heldDescriptors();
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.reserve(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      while (!stop) std::this_thread::sleep_for(milliseconds(5));
    });
  }
  {
    ProcessWatch watch(self());
    const auto with_threads = watch.stat();
    ASSERT_TRUE(with_threads);
    // Not asserted: how many threads are in D. A thread just started can fault on its stack
    // while another holds the address space's lock, and waits in D for a moment (seen under
    // ASan in CI). What this test checks is the descriptors.
    watch.threadStates(with_threads->num_threads);
    // A schedstat and a stat each, for every thread of this process but the main one: its state
    // comes with the process's stat.
    EXPECT_EQ(ProcessWatch::heldDescriptors(), before + 2 * with_threads->num_threads - 1);

    stop = true;
    for (auto& t : threads) t.join();
    const auto fewer = watch.stat();
    ASSERT_TRUE(fewer);
    EXPECT_EQ(fewer->num_threads, with_threads->num_threads - 6);
    watch.threadStates(fewer->num_threads);
    EXPECT_EQ(ProcessWatch::heldDescriptors(), before + 2 * fewer->num_threads - 1);
  }
  EXPECT_EQ(ProcessWatch::heldDescriptors(), before);
}

// Issue 16: a job hung with every thread asleep (S) was a bare not-storage. A process whose
// main thread sleeps in a read of an empty pipe says so once it has slept two checks, and says
// nothing once it runs again.
TEST(ProcessWatch, TheMainThreadsSleepIsNamedOnceItHasSleptTwoChecks) {
  int to_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_child[1]);
    char c;
    while (::read(to_child[0], &c, 1) == 1) {
    }
    ::_exit(0);
  }
  ::close(to_child[0]);
  ProcessWatch watch(fs::path("/proc") / std::to_string(child));
  std::this_thread::sleep_for(milliseconds(100));
  std::vector<std::string> seen;
  for (int i = 0; i < 4; ++i) {
    seen.push_back(watch.threadStates(1).main_sleep_wchan);
    std::this_thread::sleep_for(milliseconds(20));
  }
  // The first check reads its state; the sleep is named from the second check without a run.
  EXPECT_EQ(seen[0], "");
  EXPECT_NE(seen[3].find("pipe_read"), std::string::npos) << seen[3];  // anon_pipe_read on 6.x
  ASSERT_EQ(::write(to_child[1], "x", 1), 1);                          // it runs, and reads again
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(watch.threadStates(1).main_sleep_wchan, "");
  ::close(to_child[1]);
  ::waitpid(child, nullptr, 0);
}

// Issue 18: the kernel's count of a process's open descriptors (Linux 6.2 on), which tells the
// jobs collector whether a member's files need reading again; none on a fixture tree.
TEST(ProcessReader, OpenFileCountIsTheKernelsCountOnProcfsOnly) {
  const ProcessReader live("/proc");
  const auto self = static_cast<uint32_t>(::getpid());
  const auto before = live.openFileCount(self);
  if (!before) GTEST_SKIP() << "this kernel does not count open descriptors in /proc/PID/fd";
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(live.openFileCount(self), *before + 1);
  ::close(fd);
  EXPECT_EQ(live.openFileCount(self), *before);
  testing::ScratchDir dir;
  testing::writeFile(dir.path() / "proc" / std::to_string(self) / "fd" / "3", "x");
  EXPECT_EQ(ProcessReader(dir.path() / "proc").openFileCount(self), std::nullopt);
}

// Issue 18: a forked DataLoader worker inherits its rank's descriptors, and reading them all
// again for every worker was most of a discovery tick. Those that are the parent's same open
// file are left out (they are counted on the parent); what the worker opened itself is read.
TEST(ProcessReader, AWorkersInheritedDescriptorsAreLeftToItsParent) {
  testing::ScratchDir dir;
  testing::writeFile(dir.path() / "inherited.bin", "x");
  testing::writeFile(dir.path() / "own.bin", "x");
  // Kept across the fork (no exec follows, so O_CLOEXEC does not matter).
  const int inherited = ::open((dir.path() / "inherited.bin").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(inherited, 0);
  if (::syscall(SYS_kcmp, ::getpid(), ::getpid(), KCMP_FILE, inherited, inherited) != 0) {
    ::close(inherited);
    GTEST_SKIP() << "kcmp refused here (" << std::strerror(errno) << "): every descriptor is read";
  }
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(release[1]);  // so that it reads end-of-file, and exits, if the test gives up
    const int own = ::open((dir.path() / "own.bin").c_str(), O_RDONLY);
    char c = own >= 0 ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    [[maybe_unused]] const ssize_t n = ::read(release[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto has = [](const std::vector<std::string>& files, const std::string& name) {
    return std::any_of(files.begin(), files.end(),
                       [&](const std::string& f) { return fs::path(f).filename() == name; });
  };
  const ProcessReader reader("/proc");
  size_t all_examined = 0;
  const auto all = reader.openFiles(child, 4096, &all_examined);
  EXPECT_TRUE(has(all, "inherited.bin"));
  EXPECT_TRUE(has(all, "own.bin"));
  size_t examined = 0;
  const auto own = reader.openFiles(child, 4096, &examined, static_cast<uint32_t>(::getpid()));
  EXPECT_FALSE(has(own, "inherited.bin"));
  EXPECT_TRUE(has(own, "own.bin"));
  EXPECT_EQ(examined, all_examined);  // each still counts against the budget
  // Another proc root (its pids need not be this namespace's): every descriptor is read.
  const ProcessReader elsewhere("/proc/../proc");
  EXPECT_TRUE(has(elsewhere.openFiles(child, 4096, nullptr, static_cast<uint32_t>(::getpid())),
                  "inherited.bin"));
  ::close(inherited);
  // The parent's descriptor closed: the child's is no longer anyone else's, and is read.
  EXPECT_TRUE(has(reader.openFiles(child, 4096, nullptr, static_cast<uint32_t>(::getpid())),
                  "inherited.bin"));
  ASSERT_EQ(::write(release[1], "x", 1), 1);
  ::waitpid(child, nullptr, 0);
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
}

// The main thread's state is taken from the process's stat, read just before: a process whose
// main thread waits in D (here on a vfork child) is counted, with where it waits.
TEST(ProcessWatch, AMainThreadInDIsSeenThroughTheProcessStat) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::vfork() == 0) {
      const timespec ts{0, 800'000'000};
      ::nanosleep(&ts, nullptr);
      ::_exit(0);
    }
    ::_exit(0);
  }
  std::this_thread::sleep_for(milliseconds(200));
  ProcessWatch watch(fs::path("/proc") / std::to_string(child));
  const auto stat = watch.stat();
  ASSERT_TRUE(stat);
  EXPECT_EQ(stat->state, 'D');
  const ThreadStates states = watch.threadStates(stat->num_threads);
  EXPECT_EQ(states.d_state, 1u);
  ASSERT_EQ(states.wchans.size(), 1u);
  EXPECT_FALSE(states.wchans.front().empty());
  ::waitpid(child, nullptr, 0);
}

TEST(ProcessWatch, AnExitedProcessReadsAsGone) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ProcessWatch watch(fs::path("/proc") / std::to_string(child));
  ASSERT_TRUE(watch.stat());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(watch.stat());
  EXPECT_FALSE(watch.io());
  EXPECT_EQ(watch.threadStates(1).d_state, 0u);
}

// A tree that is not procfs (a fixture): the same rule, with every file opened afresh.
class FixtureThread : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_.path() / "proc" / "40";
    stat("D");
    testing::writeFile(dir_ / "task" / "41" / "wchan", "io_schedule");
  }
  void stat(const std::string& state) {
    testing::writeFile(dir_ / "task" / "41" / "stat",
                       "41 (pt worker) " + state + " 40 0 0 0 0 0 0 0 0 0 5 0 0 0 20 0 1 0 77\n");
  }
  void schedstat(const std::string& text) {
    testing::writeFile(dir_ / "task" / "41" / "schedstat", text);
  }
  testing::ScratchDir scratch_;
  fs::path dir_;
};

TEST_F(FixtureThread, AThreadThatDidNotRunKeepsItsState) {
  schedstat("1000 20 3\n");
  const size_t held = ProcessWatch::heldDescriptors();
  ProcessWatch watch(dir_);
  ThreadStates first = watch.threadStates(1);
  EXPECT_EQ(first.d_state, 1u);
  EXPECT_EQ(first.wchans, std::vector<std::string>{"io_schedule"});
  stat("S");  // not seen: its schedstat says it has not run
  EXPECT_EQ(watch.threadStates(1).d_state, 1u);
  schedstat("1500 20 4\n");
  EXPECT_EQ(watch.threadStates(1).d_state, 0u);
  EXPECT_EQ(ProcessWatch::heldDescriptors(), held);  // nothing held on a fixture
}

TEST_F(FixtureThread, WithoutSchedstatEveryReadLooksAtTheState) {
  ProcessWatch watch(dir_);
  EXPECT_EQ(watch.threadStates(1).d_state, 1u);
  stat("S");
  EXPECT_EQ(watch.threadStates(1).d_state, 0u);
  schedstat("0 0 0\n");  // a kernel without schedstats
  stat("D");
  EXPECT_EQ(watch.threadStates(1).d_state, 1u);
  stat("R");
  EXPECT_EQ(watch.threadStates(1).d_state, 0u);
}

// Issue 18: a thread that runs every tick is read by its stat alone, its schedstat asked only
// on its verification ticks (every 4th, staggered by its tid: 41 verifies at ticks 3, 7, 11).
TEST_F(FixtureThread, AThreadThatKeepsRunningIsReadByItsStatAlone) {
  stat("R");
  ProcessWatch watch(dir_);
  int run = 0;
  auto runs = [&] {
    ++run;
    schedstat(std::to_string(1000 * run) + " 20 " + std::to_string(run) + "\n");
  };
  for (int tick = 1; tick <= 3; ++tick) {  // three runs seen through its schedstat
    runs();
    watch.threadStates(1);
  }
  EXPECT_EQ(watch.reads().schedstat, 3u);
  EXPECT_EQ(watch.reads().stat, 3u);
  for (int tick = 4; tick <= 7; ++tick) {  // hot: 4, 5, 6 without schedstat; 7 verifies
    runs();
    watch.threadStates(1);
  }
  EXPECT_EQ(watch.reads().schedstat, 4u);
  EXPECT_EQ(watch.reads().stat, 7u);  // its state is still read every tick

  // Found in D on a hot tick (its state is read, so it is counted at once): it goes back to
  // the schedstat rule, and a D thread that has not run is not read again.
  stat("D");
  EXPECT_EQ(watch.threadStates(1).d_state, 1u);  // tick 8, hot
  EXPECT_EQ(watch.reads().schedstat, 4u);
  const ThreadStates waiting = watch.threadStates(1);  // tick 9: schedstat unchanged
  EXPECT_EQ(waiting.d_state, 1u);
  EXPECT_EQ(waiting.wchans, std::vector<std::string>{"io_schedule"});
  EXPECT_EQ(watch.reads().schedstat, 5u);
  EXPECT_EQ(watch.reads().stat, 8u);

  // It stops for good after running again: hot once more, then found stopped at the second
  // verification after (the first still sees the runs since the one before).
  stat("S");
  for (int tick = 10; tick <= 12; ++tick) {
    runs();
    watch.threadStates(1);
  }
  for (int tick = 13; tick <= 19; ++tick) watch.threadStates(1);  // no runs: verified at 15, 19
  const uint64_t schedstat_reads = watch.reads().schedstat;
  const uint64_t stat_reads = watch.reads().stat;
  EXPECT_EQ(watch.threadStates(1).d_state, 0u);  // tick 20: not hot, schedstat says idle
  EXPECT_EQ(watch.reads().schedstat, schedstat_reads + 1);
  EXPECT_EQ(watch.reads().stat, stat_reads);
}

// The same on a real thread: one that spins is read by its stat alone, and when it blocks in D
// it is counted on the tick that follows.
TEST(ProcessWatch, AThreadThatKeepsRunningIsStillSeenInD) {
  std::atomic<bool> block{false};
  std::atomic<pid_t> tid{0};
  std::vector<char> stack(64 * 1024);
  std::thread spinner([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    while (!block) {
      volatile uint64_t x = 0;
      for (int i = 0; i < 100000; ++i) x = x + 1;
      std::this_thread::sleep_for(milliseconds(1));
    }
    // A vfork-like child that sleeps: this thread waits for it in D.
    const pid_t child = ::clone(
        [](void*) -> int {
          const timespec ts{0, 600 * 1000000L};
          ::nanosleep(&ts, nullptr);
          ::_exit(0);
        },
        stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr);
    if (child > 0) ::waitpid(child, nullptr, 0);
  });
  while (tid == 0) std::this_thread::sleep_for(milliseconds(1));
  ProcessWatch watch(self());
  constexpr int kTicks = 12;
  for (int i = 0; i < kTicks; ++i) {
    watch.threadStates(threadCount());
    std::this_thread::sleep_for(milliseconds(20));
  }
  // Every thread's schedstat every tick would be kTicks per thread; the spinner's was skipped on
  // most of its ticks once it was hot.
  const uint32_t threads = threadCount();
  EXPECT_LT(watch.reads().schedstat, static_cast<uint64_t>(threads) * kTicks);

  block = true;
  const std::string stat_path = "/proc/self/task/" + std::to_string(tid.load()) + "/stat";
  bool in_d = false;
  for (int i = 0; i < 200 && !in_d; ++i) {
    std::this_thread::sleep_for(milliseconds(2));
    std::ifstream file(stat_path);
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    const auto parsed = parseProcStat(text);
    in_d = parsed && parsed->state == 'D';
  }
  ASSERT_TRUE(in_d);
  EXPECT_GE(watch.threadStates(threadCount()).d_state, 1u);
  spinner.join();
  EXPECT_EQ(watch.threadStates(threadCount()).d_state, 0u);
}

TEST(ProcFile, OneRecordShapeReadsTheWholeFile) {
  ProcFile records(self() / "stat");
  ProcFile one(self() / "stat", ProcFile::Shape::kOneRecord);
  std::string a, b, error;
  ASSERT_TRUE(records.read(a, error)) << error;
  ASSERT_TRUE(one.read(b, error)) << error;
  ASSERT_TRUE(parseProcStat(a));
  ASSERT_TRUE(parseProcStat(b));
  EXPECT_EQ(parseProcStat(a)->start_time_ticks, parseProcStat(b)->start_time_ticks);
  EXPECT_EQ(a.back(), '\n');
  EXPECT_EQ(b.back(), '\n');
}

}  // namespace
}  // namespace stallwatch::collectors
