#include "collectors/self_process.h"

#include <unistd.h>

#include <charconv>
#include <map>
#include <mutex>
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

std::optional<SelfProcess> readSelfProcess(const std::filesystem::path& proc) {
  const auto stat = readTextFile(proc / "self" / "stat");
  if (!stat) return std::nullopt;
  auto p = parseSelfStat(*stat, ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE));
  if (!p) return std::nullopt;
  // starttime is in ticks since boot: Unix time with btime; without it, none. The boot time is
  // read once per procfs root: /proc/stat is large on a many-core host (a line per CPU, one
  // of every interrupt's counts) and the kernel writes all of it for each read, every scrape.
  const auto boot = [&]() -> std::optional<uint64_t> {
    static std::mutex mutex;
    static std::map<std::filesystem::path, std::optional<uint64_t>> known;
    const std::lock_guard lock(mutex);
    if (const auto it = known.find(proc); it != known.end()) return it->second;
    const auto text = readTextFile(proc / "stat");
    const auto boot_time = text ? parseBootTime(*text) : std::nullopt;
    if (boot_time) known.emplace(proc, boot_time);
    return boot_time;
  }();
  if (p->start_time_seconds && boot) {
    *p->start_time_seconds += static_cast<double>(*boot);
  } else {
    p->start_time_seconds.reset();
  }
  if (const auto limits = readTextFile(proc / "self" / "limits"))
    p->max_fds = parseMaxOpenFiles(*limits);
  std::error_code ec;
  uint64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator(proc / "self" / "fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++fds;
  if (!ec) p->open_fds = fds;
  return p;
}

}  // namespace stallwatch::collectors
