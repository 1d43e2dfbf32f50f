// A stand-in for libnvidia-ml.so in the driver's tests, as far as its memory goes: its init
// clears an 8 MiB table in its .bss (as NVML's init clears its 13.4 MB one), writes a few
// values into it, and starts a thread. FAKE_NVML_THREAD=sleeps (the default) makes that thread
// wait until shutdown, as NVML's does; =wakes makes it run throughout, writing into the table,
// so that a give-back of the table's zero pages cannot be shown safe.
// The test_* functions let a test look at the table from outside.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "collectors/gpu/nvml_api.h"  // the driver's own declarations: called through exactly these

namespace {

constexpr size_t kTableBytes = 8u << 20;
constexpr size_t kSentinelStride = 1u << 20;  // one value every MiB: 8 pages not zero
alignas(4096) unsigned char g_table[kTableBytes];
std::atomic<int> g_inits{0};
int g_holders = 0;  // NVML counts its inits: only the first starts it, the last shutdown stops it
std::atomic<uint64_t> g_wakes{0};
std::mutex g_mutex;
std::condition_variable g_stop_cv;
bool g_stop = false;
std::thread g_thread;  // NOLINT(cert-err58-cpp)

unsigned char sentinel(size_t i) { return static_cast<unsigned char>(0x5a + i); }

}  // namespace

extern "C" {

stallwatch::nvml::Return nvmlInit_v2() {
  if (g_holders++ > 0) return stallwatch::nvml::kSuccess;
  std::memset(g_table, 0, kTableBytes);
  for (size_t i = 0; i * kSentinelStride < kTableBytes; ++i) {
    g_table[i * kSentinelStride + 123] = sentinel(i);
  }
  g_stop = false;
  const char* mode = std::getenv("FAKE_NVML_THREAD");
  const bool wakes = mode && std::string(mode) == "wakes";
  g_thread = std::thread([wakes] {
    std::unique_lock<std::mutex> lock(g_mutex);
    while (!g_stop) {
      if (!wakes) {
        g_stop_cv.wait(lock);
        continue;
      }
      // Busy: it runs throughout, so no try finds it asleep. (Waking every millisecond let a try
      // that fits between two wakes find it asleep, rightly give the pages back, and fail the
      // test now and then.)
      lock.unlock();
      std::this_thread::yield();
      // A write to a page that held only zeros: lost if that page was given back meanwhile.
      g_table[kTableBytes / 2 + 4096 + 7] = 1;
      g_wakes.fetch_add(1);
      lock.lock();
    }
  });
  g_inits.fetch_add(1);
  return stallwatch::nvml::kSuccess;
}

stallwatch::nvml::Return nvmlShutdown() {
  if (g_holders == 0 || --g_holders > 0) return stallwatch::nvml::kSuccess;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_stop = true;
  }
  g_stop_cv.notify_all();
  if (g_thread.joinable()) g_thread.join();
  return stallwatch::nvml::kSuccess;
}

stallwatch::nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 0;
  return stallwatch::nvml::kSuccess;
}

stallwatch::nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int /*index*/,
                                                       stallwatch::nvml::Device* /*device*/) {
  return static_cast<stallwatch::nvml::Return>(2);  // NVML_ERROR_INVALID_ARGUMENT: no GPUs
}

int test_inits() { return g_inits.load(); }

// The table's resident bytes.
size_t test_resident_bytes() {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  unsigned char resident[kTableBytes / 4096] = {};
  if (::mincore(g_table, kTableBytes, resident) != 0) return 0;
  size_t bytes = 0;
  for (size_t i = 0; i < kTableBytes / page; ++i) bytes += (resident[i] & 1) ? page : 0;
  return bytes;
}

// 1 when every value init wrote is still there and every other byte is zero (the waking
// thread's own byte aside).
int test_table_intact() {
  for (size_t i = 0; i < kTableBytes; ++i) {
    if (i == kTableBytes / 2 + 4096 + 7) continue;
    const unsigned char want = i % kSentinelStride == 123 ? sentinel(i / kSentinelStride) : 0;
    if (g_table[i] != want) return 0;
  }
  return 1;
}

}  // extern "C"
