#include "collectors/self_process.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
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

std::optional<std::pair<uint64_t, uint64_t>> parseStatm(std::string_view statm, long page_size) {
  // "size resident shared text lib data dt", in pages (proc(5)).
  const size_t space = statm.find(' ');
  if (space == std::string_view::npos || page_size <= 0) return std::nullopt;
  std::string_view rest = statm.substr(space + 1);
  const auto size = number(statm.substr(0, space));
  const auto resident = number(rest.substr(0, rest.find_first_of(" \n")));
  if (!size || !resident) return std::nullopt;
  const auto page = static_cast<uint64_t>(page_size);
  return std::pair{*size * page, *resident * page};
}

std::optional<double> SelfProcessReader::processCpuSeconds() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return std::nullopt;
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

SelfProcessReader::SelfProcessReader(std::filesystem::path proc, CpuSeconds cpu_seconds)
    : proc_(std::move(proc)),
      fd_dir_(proc_ / "self" / "fd"),
      cpu_seconds_(std::move(cpu_seconds)),
      statm_(proc_ / "self" / "statm", ProcFile::Shape::kOneRecord) {}

SelfProcessReader::~SelfProcessReader() {
  if (fd_dir_fd_ >= 0) ::close(fd_dir_fd_);
}

std::optional<SelfProcess> SelfProcessReader::read() {
  if (!statm_.read(text_, error_)) return std::nullopt;
  static const long ticks = ::sysconf(_SC_CLK_TCK), page = ::sysconf(_SC_PAGESIZE);
  const auto memory = parseStatm(text_, page);
  const auto cpu = cpu_seconds_ ? cpu_seconds_() : std::nullopt;
  if (!memory || !cpu) return std::nullopt;
  SelfProcess p;
  p.cpu_seconds = *cpu;
  p.virtual_bytes = memory->first;
  p.resident_bytes = memory->second;
  // starttime is in ticks since boot: Unix time with btime. Both are fixed: read until had,
  // then never again (/proc/stat is large on a many-core host, and written whole each read).
  if (!start_time_seconds_) {
    const auto stat = readTextFile(proc_ / "self" / "stat");
    const auto parsed = stat ? parseSelfStat(*stat, ticks, page) : std::nullopt;
    const auto proc_stat =
        parsed && parsed->start_time_seconds ? readTextFile(proc_ / "stat") : std::nullopt;
    if (const auto boot = proc_stat ? parseBootTime(*proc_stat) : std::nullopt)
      start_time_seconds_ = *parsed->start_time_seconds + static_cast<double>(*boot);
  }
  p.start_time_seconds = start_time_seconds_;
  // The limit changes only by prlimit(1) from outside: a minute late at most.
  const auto now = std::chrono::steady_clock::now();
  if (!limits_read_ || now - *limits_read_ >= std::chrono::minutes(1)) {
    const auto limits = readTextFile(proc_ / "self" / "limits");
    max_fds_ = limits ? parseMaxOpenFiles(*limits) : std::nullopt;
    limits_read_ = now;
  }
  p.max_fds = max_fds_;
  // Since Linux 6.2 the directory's size is its count of open files: one fstat, where listing
  // it makes the kernel build an entry for each.
  if (fd_dir_fd_ == -1) {
    struct statfs fs {};
    const bool on_proc = ::statfs(fd_dir_.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
    fd_dir_fd_ = on_proc ? ::open(fd_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -2;
    if (fd_dir_fd_ < 0) fd_dir_fd_ = -2;
  }
  struct stat st {};
  if (fd_dir_fd_ >= 0 && ::fstat(fd_dir_fd_, &st) == 0 && st.st_size > 0) {
    p.open_fds = static_cast<uint64_t>(st.st_size);  // counting the one kept open here
    return p;
  }
  std::error_code ec;
  uint64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator(fd_dir_, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  if (!ec) p.open_fds = fds;
  return p;
}

std::optional<SelfProcess> readSelfProcess(const std::filesystem::path& proc) {
  return SelfProcessReader(proc).read();
}

}  // namespace stallwatch::collectors
