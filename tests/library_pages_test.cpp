#include "collectors/gpu/library_pages.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "collectors/gpu/gpu_driver.h"
#include "collectors/proc_file.h"
#include "test_support.h"

namespace stallwatch::collectors {
namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

alignas(4096) unsigned char g_program_table[1u << 20];

std::vector<bool> residentPages(const void* begin, size_t pages) {
  std::vector<unsigned char> vec(pages);
  EXPECT_EQ(::mincore(const_cast<void*>(begin), pages * kPage, vec.data()), 0);
  std::vector<bool> out;
  for (unsigned char v : vec) out.push_back((v & 1) != 0);
  return out;
}

bool schedstatsReadable() {
  const auto text = readTextFile("/proc/self/schedstat");
  return text && text->rfind("0 0 0", 0) != 0;
}

TEST(LibraryPages, BssPagesOfFindsAProgramsZeroInitialisedData) {
  const auto bss = bssPagesOf(g_program_table);
  ASSERT_TRUE(bss.has_value());
  EXPECT_EQ(bss->begin % kPage, 0u);
  // The table's pages past the one the file may share with .data are inside the range.
  const auto first = reinterpret_cast<uintptr_t>(g_program_table) + kPage;
  const auto last = reinterpret_cast<uintptr_t>(g_program_table) + sizeof g_program_table;
  EXPECT_LE(bss->begin, first);
  EXPECT_GE(bss->end, last);
  int on_the_stack = 0;
  EXPECT_FALSE(bssPagesOf(&on_the_stack).has_value());
}

TEST(LibraryPages, OnlyResidentPagesHoldingOnlyZerosAreGivenBack) {
  constexpr size_t kPages = 64, kTouched = 48;
  void* map =
      ::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* bytes = static_cast<volatile unsigned char*>(map);
  for (size_t p = 0; p < kTouched; ++p) bytes[p * kPage] = 0;  // written, so resident
  bytes[5 * kPage + 100] = 7;
  bytes[31 * kPage - 1] = 9;  // the last byte of page 30
  const AddressRange range{reinterpret_cast<uintptr_t>(map),
                           reinterpret_cast<uintptr_t>(map) + kPages * kPage};

  const ReleasedPages released = releaseZeroPages(range);

  EXPECT_EQ(released.resident_bytes, kTouched * kPage);
  EXPECT_EQ(released.released_bytes, (kTouched - 2) * kPage);
  const auto resident = residentPages(map, kPages);
  for (size_t p = 0; p < kPages; ++p) {
    EXPECT_EQ(resident[p], p == 5 || p == 30) << "page " << p;
  }
  EXPECT_EQ(bytes[5 * kPage + 100], 7);
  EXPECT_EQ(bytes[31 * kPage - 1], 9);
  for (size_t i = 0; i < kPages * kPage; ++i) {
    if (i == 5 * kPage + 100 || i == 31 * kPage - 1) continue;
    ASSERT_EQ(bytes[i], 0) << "byte " << i;
  }
  ::munmap(map, kPages * kPage);
}

TEST(LibraryPages, AnUnalignedOrEmptyRangeIsLeftAlone) {
  std::memset(g_program_table, 0, sizeof g_program_table);
  const auto at = reinterpret_cast<uintptr_t>(g_program_table);
  EXPECT_EQ(releaseZeroPages({at + 1, at + sizeof g_program_table}).released_bytes, 0u);
  EXPECT_EQ(releaseZeroPages({at, at}).released_bytes, 0u);
  EXPECT_EQ(residentPages(g_program_table, 4), std::vector<bool>(4, true));
}

// A thread that waits on a condition variable until told to work a while or to stop.
class Sleeper {
 public:
  explicit Sleeper(bool spin = false)
      : thread_([this, spin] {
          if (spin) {
            while (!stop_.load()) {
            }
            return;
          }
          std::unique_lock<std::mutex> lock(mutex_);
          while (!stop_.load()) {
            cv_.wait(lock);
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
            while (std::chrono::steady_clock::now() < until) {
            }
            worked_.fetch_add(1);
          }
        }) {}
  ~Sleeper() {
    stop_ = true;
    cv_.notify_all();
    thread_.join();
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
  void workOnce() {
    const int before = worked_.load();
    cv_.notify_all();
    while (worked_.load() == before) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // back asleep
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::atomic<int> worked_{0};
  std::thread thread_;
};

TEST(ThreadsAtRest, ANewThreadAsleepIsAtRestUntilItRuns) {
  if (!schedstatsReadable()) GTEST_SKIP() << "no schedstat on this kernel";
  const auto before = ThreadsAtRest::list("/proc/self/task");
  Sleeper sleeper;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ThreadsAtRest rest;
  ASSERT_TRUE(rest.begin("/proc/self/task", before));
  EXPECT_EQ(rest.threads(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(rest.stillAtRest());
  sleeper.workOnce();
  EXPECT_FALSE(rest.stillAtRest());
}

TEST(ThreadsAtRest, ARunningNewThreadCannotBeShownAtRest) {
  if (!schedstatsReadable()) GTEST_SKIP() << "no schedstat on this kernel";
  const auto before = ThreadsAtRest::list("/proc/self/task");
  Sleeper spinner(/*spin=*/true);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ThreadsAtRest rest;
  EXPECT_FALSE(rest.begin("/proc/self/task", before));
}

// The NVML driver on a library that behaves like NVML's memory (tests/fake_nvml.cpp).
class NvmlZeroPages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!schedstatsReadable()) GTEST_SKIP() << "no schedstat on this kernel";
    fake_ = ::dlopen(stallwatch::testing::fakeNvmlPath(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << ::dlerror();
    resident_ = reinterpret_cast<size_t (*)()>(::dlsym(fake_, "test_resident_bytes"));
    intact_ = reinterpret_cast<int (*)()>(::dlsym(fake_, "test_table_intact"));
    inits_ = reinterpret_cast<int (*)()>(::dlsym(fake_, "test_inits"));
    ASSERT_TRUE(resident_ && intact_ && inits_);
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_THREAD");
    if (fake_) ::dlclose(fake_);
  }
  static constexpr size_t kTable = 8u << 20;
  void* fake_ = nullptr;
  size_t (*resident_)() = nullptr;
  int (*intact_)() = nullptr;
  int (*inits_)() = nullptr;
};

TEST_F(NvmlZeroPages, TheZeroFilledTablesAreGivenBackWhileItsThreadSleeps) {
  const int inits = inits_();
  auto driver = makeNvmlDriver(stallwatch::testing::fakeNvmlPath());
  ASSERT_TRUE(driver->init().ok());
  EXPECT_EQ(inits_(), inits + 1);
  // The eight pages holding a value stay; the rest went back.
  EXPECT_LE(resident_(), 8 * kPage);
  EXPECT_GE(resident_(), 8 * kPage);
  EXPECT_EQ(intact_(), 1);
}

TEST_F(NvmlZeroPages, KeptWhenAskedTo) {
  auto driver =
      makeNvmlDriver(stallwatch::testing::fakeNvmlPath(), NvmlOptions{.release_zero_pages = false});
  ASSERT_TRUE(driver->init().ok());
  EXPECT_EQ(resident_(), kTable);
  EXPECT_EQ(intact_(), 1);
}

TEST_F(NvmlZeroPages, OnlyTheInitThatStartedItGivesPagesBack) {
  // The first holder keeps its pages; a second driver's init is NVML's count going up: its
  // threads are not new, so nothing shows they sleep, and nothing is given back.
  auto keeper =
      makeNvmlDriver(stallwatch::testing::fakeNvmlPath(), NvmlOptions{.release_zero_pages = false});
  ASSERT_TRUE(keeper->init().ok());
  auto second = makeNvmlDriver(stallwatch::testing::fakeNvmlPath());
  ASSERT_TRUE(second->init().ok());
  EXPECT_EQ(resident_(), kTable);
  EXPECT_EQ(intact_(), 1);
}

TEST_F(NvmlZeroPages, KeptWhenItsThreadRunsMeanwhile) {
  ::setenv("FAKE_NVML_THREAD", "wakes", 1);
  auto driver = makeNvmlDriver(stallwatch::testing::fakeNvmlPath());
  ASSERT_TRUE(driver->init().ok());
  // Restarted and tried again while the thread kept waking, then kept: all of it resident.
  EXPECT_EQ(resident_(), kTable);
  EXPECT_EQ(intact_(), 1);
}

}  // namespace
}  // namespace stallwatch::collectors
