#include "collectors/gpu/library_pages.h"

#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "collectors/proc_file.h"
#include "collectors/proc_pid.h"

namespace stallwatch::collectors {
namespace {

uintptr_t pageSize() {
  static const auto size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

struct Search {
  uintptr_t address = 0;
  std::optional<AddressRange> bss;
};

// For the object whose PT_LOAD segments hold the address: its writable segment's pages past
// the end of what the file backs (p_filesz) up to the end of its memory (p_memsz). The page
// that holds both the file's last bytes and the start of .bss is file-backed: left out.
int visit(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* search = static_cast<Search*>(data);
  bool holds = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (search->address >= start && search->address < start + ph.p_memsz) holds = true;
  }
  if (!holds) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) == 0 || ph.p_memsz <= ph.p_filesz) continue;
    const uintptr_t page = pageSize();
    const uintptr_t file_end = info->dlpi_addr + ph.p_vaddr + ph.p_filesz;
    const uintptr_t mem_end = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
    const uintptr_t begin = (file_end + page - 1) / page * page;
    const uintptr_t end = (mem_end + page - 1) / page * page;  // the loader maps whole pages
    if (end > begin) search->bss = AddressRange{begin, end};
  }
  return 1;  // found the object: stop
}

// Memory addresses come from the loader as integers (dlpi_addr + p_vaddr), and page arithmetic
// is done on them: this is the one place they become pointers again.
unsigned char* toPointer(uintptr_t address) {
  return reinterpret_cast<unsigned char*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// Reads whole pages of a library's memory, across its objects' bounds by design: under
// AddressSanitizer those bounds carry redzones, so this one function is not instrumented.
using Word [[gnu::may_alias]] = uint64_t;
__attribute__((no_sanitize("address"))) bool allZero(const unsigned char* page, size_t bytes) {
  const auto* words = reinterpret_cast<const Word*>(page);  // page-aligned
  Word any = 0;
  for (size_t i = 0; i < bytes / sizeof(Word); ++i) any |= words[i];  // vectorised
  return any == 0;
}

}  // namespace

std::optional<AddressRange> bssPagesOf(const void* address) {
  Search search;
  search.address = reinterpret_cast<uintptr_t>(address);
  ::dl_iterate_phdr(visit, &search);
  return search.bss;
}

ReleasedPages releaseZeroPages(AddressRange range) {
  ReleasedPages out;
  const uintptr_t page = pageSize();
  if (range.begin % page != 0 || range.end <= range.begin) return out;
  const size_t pages = (range.end - range.begin) / page;
  std::vector<unsigned char> resident(pages);
  // mincore: reading a page that is not resident would map the shared zero page, needlessly.
  if (::mincore(toPointer(range.begin), range.end - range.begin, resident.data()) != 0) {
    return out;
  }
  // Runs of zero pages are given back in one call.
  uintptr_t run_begin = 0;
  auto flush = [&](uintptr_t run_end) {
    if (run_begin == 0) return;
    if (::madvise(toPointer(run_begin), run_end - run_begin, MADV_DONTNEED) == 0) {
      out.released_bytes += run_end - run_begin;
    }
    run_begin = 0;
  };
  for (size_t i = 0; i < pages; ++i) {
    const uintptr_t at = range.begin + i * page;
    if ((resident[i] & 1) == 0) {
      flush(at);
      continue;
    }
    out.resident_bytes += page;
    if (allZero(toPointer(at), page)) {
      if (run_begin == 0) run_begin = at;
    } else {
      flush(at);
    }
  }
  flush(range.end);
  return out;
}

std::vector<std::string> ThreadsAtRest::list(const std::filesystem::path& task_dir) {
  std::vector<std::string> tids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(task_dir, ec)) {
    tids.push_back(entry.path().filename().string());
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::optional<std::string> ThreadsAtRest::restingSnapshot(const std::string& tid) const {
  const auto stat_text = readTextFile(task_dir_ / tid / "stat");
  const auto schedstat = readTextFile(task_dir_ / tid / "schedstat");
  if (!stat_text || !schedstat || schedstat->rfind("0 0 0", 0) == 0) return std::nullopt;
  const auto stat = parseProcStat(*stat_text);
  // R: running or runnable, so it may run (and write) at any moment.
  if (!stat || stat->state == 'R') return std::nullopt;
  return std::string(1, stat->state) + " " + *schedstat;
}

bool ThreadsAtRest::begin(const std::filesystem::path& task_dir,
                          const std::vector<std::string>& before) {
  task_dir_ = task_dir;
  tids_.clear();
  snapshots_.clear();
  for (const auto& tid : list(task_dir)) {
    if (std::binary_search(before.begin(), before.end(), tid)) continue;
    auto snapshot = restingSnapshot(tid);
    if (!snapshot) return false;
    tids_.push_back(tid);
    snapshots_.push_back(std::move(*snapshot));
  }
  return true;
}

bool ThreadsAtRest::stillAtRest() const {
  for (size_t i = 0; i < tids_.size(); ++i) {
    if (restingSnapshot(tids_[i]) != snapshots_[i]) return false;
  }
  return true;
}

}  // namespace stallwatch::collectors
