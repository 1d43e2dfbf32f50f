#include "collectors/self_process.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <charconv>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/proc_file.h"

namespace stallwatch::collectors {
namespace {

std::optional<uint64_t> number(std::string_view s) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<SelfProcess> parseSelfStat(std::string_view stat, long ticks_per_second,
                                         long page_size) {
  // "pid (comm) state ppid ...": comm may hold spaces and ')', so the fields count from the
  // last ')'. After it, field 3 (state) is index 0: utime is field 14, stime 15, starttime 22,
  // vsize 23, rss 24 (proc(5)).
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticks_per_second <= 0 || page_size <= 0)
    return std::nullopt;
  std::vector<std::string_view> fields;
  std::string_view rest = stat.substr(close + 1);
  while (!rest.empty()) {
    const size_t start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = rest.find_first_of(" \n");
    fields.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  if (fields.size() < 22) return std::nullopt;
  const auto utime = number(fields[11]), stime = number(fields[12]);
  const auto vsize = number(fields[20]), rss = number(fields[21]);
  if (!utime || !stime || !vsize || !rss) return std::nullopt;
  SelfProcess p;
  p.cpu_seconds = static_cast<double>(*utime + *stime) / static_cast<double>(ticks_per_second);
  p.virtual_bytes = *vsize;
  p.resident_bytes = *rss * static_cast<uint64_t>(page_size);
  if (const auto start = number(fields[19]))
    p.start_time_seconds = static_cast<double>(*start) / static_cast<double>(ticks_per_second);
  return p;
}

std::optional<uint64_t> parseMaxOpenFiles(std::string_view limits) {
  std::istringstream in{std::string(limits)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    std::string soft;
    fields >> soft;
    return number(soft);  // "unlimited": none
  }
  return std::nullopt;
}

std::optional<uint64_t> parseBootTime(std::string_view proc_stat) {
  std::istringstream in{std::string(proc_stat)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return number(line.substr(6));
  }
  return std::nullopt;
}

SelfProcessReader::SelfProcessReader(std::filesystem::path proc)
    : proc_(std::move(proc)),
      fd_dir_(proc_ / "self" / "fd"),
      stat_(proc_ / "self" / "stat", ProcFile::Shape::kOneRecord) {}

std::optional<SelfProcess> SelfProcessReader::read() {
  if (!stat_.read(text_, error_)) return std::nullopt;
  static const long ticks = ::sysconf(_SC_CLK_TCK), page = ::sysconf(_SC_PAGESIZE);
  auto p = parseSelfStat(text_, ticks, page);
  if (!p) return std::nullopt;
  // starttime is in ticks since boot: Unix time with btime; without it, none. /proc/stat is
  // large on a many-core host (a line per CPU, one of every interrupt's counts) and the kernel
  // writes all of it for each read: read until it gives a boot time, then never again.
  if (!boot_time_) {
    const auto text = readTextFile(proc_ / "stat");
    boot_time_ = text ? parseBootTime(*text) : std::nullopt;
  }
  if (p->start_time_seconds && boot_time_) {
    *p->start_time_seconds += static_cast<double>(*boot_time_);
  } else {
    p->start_time_seconds.reset();
  }
  // The limit changes only by prlimit(1) from outside: a minute late at most.
  const auto now = std::chrono::steady_clock::now();
  if (!limits_read_ || now - *limits_read_ >= std::chrono::minutes(1)) {
    const auto limits = readTextFile(proc_ / "self" / "limits");
    max_fds_ = limits ? parseMaxOpenFiles(*limits) : std::nullopt;
    limits_read_ = now;
  }
  p->max_fds = max_fds_;
  // Since Linux 6.2 the directory's size is its count of open files: one stat, where listing
  // it makes the kernel build an entry for each.
  if (!fd_dir_on_proc_) {
    struct statfs fs {};
    fd_dir_on_proc_ = ::statfs(fd_dir_.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
  }
  struct stat st {};
  if (*fd_dir_on_proc_ && ::stat(fd_dir_.c_str(), &st) == 0 && st.st_size > 0) {
    p->open_fds = static_cast<uint64_t>(st.st_size);
    return p;
  }
  std::error_code ec;
  uint64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator(fd_dir_, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  if (!ec) p->open_fds = fds;
  return p;
}

std::optional<SelfProcess> readSelfProcess(const std::filesystem::path& proc) {
  return SelfProcessReader(proc).read();
}

}  // namespace stallwatch::collectors
