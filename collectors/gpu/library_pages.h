// Giving back a loaded library's zero-initialised data that holds only zeros (issue 18).
//
// nvmlInit writes all of NVML's 13.4 MB .bss (driver 580: its tables, cleared at init) and
// leaves 13.5 MB of it holding nothing but zeros: most of the agent's anonymous RSS
// (docs/MEASUREMENTS.md, "NVML's zeroed tables"). A private anonymous page given back with
// MADV_DONTNEED reads as zeros again, so giving back a page that holds only zeros changes
// nothing the library can see, as long as nothing writes the page between the check and the
// give-back: the caller must make sure of that (no call into the library meanwhile, and the
// library's own threads asleep throughout: see ThreadsAtRest).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace stallwatch::collectors {

struct AddressRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  uint64_t bytes() const { return end - begin; }
};

// The whole pages of the .bss of the loaded object (library or program) that holds ADDRESS:
// its writable segment's memory beyond the last page its file backs, which the loader maps
// anonymous and private. nullopt if no loaded object holds ADDRESS or it has no such pages.
std::optional<AddressRange> bssPagesOf(const void* address);

struct ReleasedPages {
  uint64_t resident_bytes = 0;  // resident in RANGE before
  uint64_t released_bytes = 0;  // of those, held only zeros and were given back
};

// Gives back RANGE's resident pages that hold only zeros. RANGE must be private anonymous
// memory (a .bss from bssPagesOf, an anonymous mmap) that nothing writes meanwhile.
ReleasedPages releaseZeroPages(AddressRange range);

// Whether the threads of a process that were not there before stayed asleep over a span:
// a thread that did not run cannot have written memory. Built from the thread ids listed
// before the span's cause (an init that starts threads) and TASK_DIR (/proc/self/task).
class ThreadsAtRest {
 public:
  static std::vector<std::string> list(const std::filesystem::path& task_dir);

  // Takes the new threads' state and schedstat. False when it cannot tell: a new thread is
  // running, or its schedstat is unreadable or all zeros (a kernel without schedstats).
  bool begin(const std::filesystem::path& task_dir, const std::vector<std::string>& before);
  // True when every new thread is asleep and has the schedstat it had at begin().
  bool stillAtRest() const;
  size_t threads() const { return tids_.size(); }

 private:
  // "STATE SCHEDSTAT" of TID, nullopt if it runs or cannot be read.
  std::optional<std::string> restingSnapshot(const std::string& tid) const;
  std::filesystem::path task_dir_;
  std::vector<std::string> tids_;
  std::vector<std::string> snapshots_;
};

}  // namespace stallwatch::collectors
