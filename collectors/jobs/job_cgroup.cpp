#include "collectors/jobs/job_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "collectors/counter_rates.h"
#include "collectors/devices/mountinfo.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"
#include "common/units.h"

namespace fs = std::filesystem;

namespace stallwatch::collectors {
namespace {

constexpr size_t kMaxCgroupFields = 16;

// The io.max and io.stat shape: for each line "MAJ:MIN KEY=VALUE ...", a T with the device
// number, each KEY=VALUE given to SET(t, key, value). Lines without a device number are skipped.
template <typename T, typename Set>
std::vector<T> parseDeviceLines(std::string_view text, Set set) {
  std::vector<T> out;
  forEachLine(text, [&](std::string_view line, size_t) {
    std::string_view f[kMaxCgroupFields];
    const size_t count = std::min(splitFields(line, f), kMaxCgroupFields);
    const auto dev = count > 0 ? parseDevnum(f[0]) : std::nullopt;
    if (!dev) return;
    T t;
    std::tie(t.major, t.minor) = *dev;
    for (size_t i = 1; i < count; ++i) {
      const size_t eq = f[i].find('=');
      if (eq != std::string_view::npos) set(t, f[i].substr(0, eq), f[i].substr(eq + 1));
    }
    out.push_back(t);
  });
  return out;
}

std::string mib(uint64_t bytes) { return common::mibPerSecondText(static_cast<double>(bytes)); }

}  // namespace

std::vector<IoLimit> parseIoMax(std::string_view text) {
  return parseDeviceLines<IoLimit>(
      text, [](IoLimit& l, std::string_view key, std::string_view value) {
        const auto v = value == "max" ? std::nullopt : parseUnsigned(value);
        if (key == "rbps") l.rbps = v;
        if (key == "wbps") l.wbps = v;
        if (key == "riops") l.riops = v;
        if (key == "wiops") l.wiops = v;
      });
}

std::vector<IoStat> parseIoStat(std::string_view text) {
  return parseDeviceLines<IoStat>(text,
                                  [](IoStat& s, std::string_view key, std::string_view value) {
                                    const uint64_t v = parseUnsigned(value).value_or(0);
                                    if (key == "rbytes") s.rbytes = v;
                                    if (key == "wbytes") s.wbytes = v;
                                    if (key == "rios") s.rios = v;
                                    if (key == "wios") s.wios = v;
                                  });
}

std::optional<CpuMax> parseCpuMax(std::string_view text) {
  std::string_view f[3];
  const size_t newline = text.find('\n');
  if (newline != std::string_view::npos) text = text.substr(0, newline);  // "50000 100000\n"
  if (splitFields(text, f) != 2) return std::nullopt;
  const auto period = parseUnsigned(f[1]);
  if (!period || *period == 0) return std::nullopt;
  CpuMax c;
  c.period_us = *period;
  if (f[0] != "max") {
    c.quota_us = parseUnsigned(f[0]);
    if (!c.quota_us) return std::nullopt;
  }
  return c;
}

std::optional<uint64_t> parseMemoryLimit(std::string_view text) {
  const size_t newline = text.find('\n');
  if (newline != std::string_view::npos) text = text.substr(0, newline);
  return text == "max" ? std::nullopt : parseUnsigned(text);
}

std::optional<uint32_t> countCpuList(std::string_view text) {
  const size_t newline = text.find('\n');
  if (newline != std::string_view::npos) text = text.substr(0, newline);
  uint32_t count = 0;
  while (!text.empty()) {
    const size_t comma = std::min(text.find(','), text.size());
    const std::string_view range = text.substr(0, comma);
    const size_t dash = range.find('-');
    const auto first = parseUnsigned(range.substr(0, dash));
    const auto last =
        dash == std::string_view::npos ? first : parseUnsigned(range.substr(dash + 1));
    if (!first || !last || *last < *first || *last - *first > 65535) return std::nullopt;
    count += static_cast<uint32_t>(*last - *first + 1);
    text.remove_prefix(std::min(comma + 1, text.size()));
  }
  if (count == 0) return std::nullopt;
  return count;
}

bool CgroupReading::anyLimit() const {
  return std::any_of(io_max.begin(), io_max.end(), [](const IoLimit& l) { return l.any(); }) ||
         (cpu_max && cpu_max->quota_us) || memory_max || memory_high;
}

std::optional<CpuStat> parseCpuStat(std::string_view text) {
  CpuStat c;
  bool usage = false;
  forEachLine(text, [&](std::string_view line, size_t) {
    std::string_view f[3];
    if (splitFields(line, f) != 2) return;
    const auto v = parseUnsigned(f[1]);
    if (!v) return;
    if (f[0] == "usage_usec") {
      c.usage_us = *v;
      usage = true;
    }
    if (f[0] == "throttled_usec") c.throttled_us = *v;
    if (f[0] == "nr_throttled") c.nr_throttled = *v;
  });
  if (!usage) return std::nullopt;
  return c;
}

std::optional<std::string> cgroupV2Path(std::string_view text) {
  std::optional<std::string> path;
  forEachLine(text, [&](std::string_view line, size_t) {
    if (line.substr(0, 3) == "0::" && line.size() > 3 && line[3] == '/') {
      path = std::string(line.substr(3));
    }
  });
  return path;
}

bool controllerListHas(std::string_view text, std::string_view controller) {
  std::string_view names[16];  // the kernel has 11 controllers
  const size_t n = std::min(splitFields(text.substr(0, text.find('\n')), names), std::size(names));
  return std::find(names, names + n, controller) != names + n;
}

std::optional<std::string> cgroupV1Path(std::string_view text, std::string_view controller) {
  std::optional<std::string> path;
  forEachLine(text, [&](std::string_view line, size_t) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos || second + 1 >= line.size() || line[second + 1] != '/')
      return;
    if (listHas(line.substr(first + 1, second - first - 1), controller))
      path = std::string(line.substr(second + 1));
  });
  return path;
}

std::string describeIoLimits(const std::vector<IoLimit>& limits, const std::string& where,
                             const std::function<std::string(uint32_t, uint32_t)>& name_of) {
  std::string out;
  for (const IoLimit& l : limits) {
    if (!l.any()) continue;
    std::string line = std::to_string(l.major) + ":" + std::to_string(l.minor);
    if (const std::string name = name_of ? name_of(l.major, l.minor) : ""; !name.empty())
      line += " (" + name + ")";
    if (l.rbps) line += " rbps=" + mib(*l.rbps);
    if (l.wbps) line += " wbps=" + mib(*l.wbps);
    if (l.riops) line += " riops=" + std::to_string(*l.riops);
    if (l.wiops) line += " wiops=" + std::to_string(*l.wiops);
    out += (out.empty() ? "io.max " : ", ") + line;
  }
  return out.empty() ? out : out + " in " + where;
}

std::string describeCpuLimit(const std::optional<CpuMax>& cpu, const std::string& where) {
  if (!cpu || !cpu->quota_us) return {};
  char cores[32];
  std::snprintf(cores, sizeof cores, "%.2f",
                static_cast<double>(*cpu->quota_us) / static_cast<double>(cpu->period_us));
  return "cpu.max " + std::to_string(*cpu->quota_us) + " " + std::to_string(cpu->period_us) + " (" +
         cores + " CPU) in " + where;
}

std::string describeMemoryLimits(const CgroupReading& r, const std::string& where) {
  auto gib = [](uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return std::string(text);
  };
  std::string out;
  if (r.memory_max) out = "memory.max " + gib(*r.memory_max) + " in " + where;
  if (r.memory_high)
    out += (out.empty() ? "" : "; ") + ("memory.high " + gib(*r.memory_high) + " in " + where);
  return out;
}

std::string cgroupWhere(const fs::path& dir, int levels_up) {
  if (levels_up <= 0) return dir.string();
  return dir.string() +
         (levels_up == 1 ? " (parent of the job's cgroup)"
                         : " (" + std::to_string(levels_up) + " levels above the job's cgroup)");
}

CgroupReader::CgroupReader(const SystemRoot& root) : proc_(root.proc) {
  auto mounts = readMountinfo(root);
  if (!mounts) return;
  const auto under_root = [&root](const std::string& mount_point) {
    return mountPointUnder(root, mount_point).value_or(fs::path());
  };
  for (const MountInfo& m : mounts->mounts) {
    if (m.fs_type == "cgroup2" && base_.empty()) base_ = under_root(m.mount_point);
    if (m.fs_type == "cgroup" && memory_v1_.empty() && listHas(m.super_options, "memory"))
      memory_v1_ = under_root(m.mount_point);
  }
}

std::optional<std::string> CgroupReader::pathOf(uint32_t pid) const {
  const auto text = readTextFile(proc_ / std::to_string(pid) / "cgroup");
  return text ? cgroupV2Path(*text) : std::nullopt;
}

std::optional<fs::path> CgroupReader::cgroupOf(uint32_t pid) const {
  if (base_.empty()) return std::nullopt;
  const auto path = pathOf(pid);
  // The root cgroup is the whole node's: its figures are not the job's own.
  if (!path || *path == "/") return std::nullopt;
  return base_ / fs::path(*path).relative_path();
}

std::optional<fs::path> CgroupReader::mirroredMemoryCgroupOf(uint32_t pid) const {
  if (memory_v1_.empty()) return std::nullopt;
  const auto text = readTextFile(proc_ / std::to_string(pid) / "cgroup");
  if (!text) return std::nullopt;
  const auto v2 = cgroupV2Path(*text);
  const auto memory = cgroupV1Path(*text, "memory");
  if (!v2 || !memory || *memory == "/" || *memory != *v2) return std::nullopt;
  return memory_v1_ / fs::path(*memory).relative_path();
}

CgroupReading CgroupReader::read(const fs::path& dir) const {
  CgroupReading r;
  auto pressure = [&](const char* name) -> std::optional<PressureStats> {
    const auto text = readTextFile(dir / name);
    if (!text) return std::nullopt;
    return parsePressure(*text).stats;
  };
  r.io = pressure("io.pressure");
  r.cpu = pressure("cpu.pressure");
  r.memory = pressure("memory.pressure");
  if (auto t = readTextFile(dir / "io.max")) r.io_max = parseIoMax(*t);
  if (auto t = readTextFile(dir / "io.stat")) r.io_stat = parseIoStat(*t);
  if (auto t = readTextFile(dir / "cpu.max")) r.cpu_max = parseCpuMax(*t);
  if (auto t = readTextFile(dir / "cpu.stat")) r.cpu_stat = parseCpuStat(*t);
  if (auto t = readTextFile(dir / "memory.max")) r.memory_max = parseMemoryLimit(*t);
  if (auto t = readTextFile(dir / "memory.high")) r.memory_high = parseMemoryLimit(*t);
  return r;
}

CgroupReading CgroupReader::readLimits(const fs::path& dir) const {
  CgroupReading r;
  r.ancestor = true;
  if (auto t = readTextFile(dir / "io.max")) r.io_max = parseIoMax(*t);
  if (auto t = readTextFile(dir / "cpu.max")) r.cpu_max = parseCpuMax(*t);
  if (auto t = readTextFile(dir / "memory.max")) r.memory_max = parseMemoryLimit(*t);
  if (auto t = readTextFile(dir / "memory.high")) r.memory_high = parseMemoryLimit(*t);
  return r;
}

std::vector<fs::path> CgroupReader::ancestorsOf(const fs::path& dir) const {
  std::vector<fs::path> out;
  if (base_.empty()) return out;
  const fs::path relative = dir.lexically_relative(base_);
  if (relative.empty() || *relative.begin() == "..") return out;  // not under the mount
  for (fs::path p = dir.parent_path(); p != base_ && p.string().size() > base_.string().size();
       p = p.parent_path()) {
    out.push_back(p);
  }
  return out;
}

std::optional<uint32_t> CgroupReader::cpusAllowed(uint32_t pid) const {
  const auto text = readTextFile(proc_ / std::to_string(pid) / "status");
  if (!text) return std::nullopt;
  constexpr std::string_view kKey = "Cpus_allowed_list:";
  std::optional<uint32_t> count;
  forEachLine(*text, [&](std::string_view line, size_t) {
    if (line.substr(0, kKey.size()) != kKey) return;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    count = countCpuList(line);
  });
  return count;
}

namespace {

// Whether two readings of a cgroup's io.stat show no I/O between them.
bool sameIo(const std::vector<IoStat>& a, const std::vector<IoStat>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const IoStat& x, const IoStat& y) {
    return x.major == y.major && x.minor == y.minor && x.rbytes == y.rbytes &&
           x.wbytes == y.wbytes && x.rios == y.rios && x.wios == y.wios;
  });
}

}  // namespace

IoStatWalk CgroupReader::leafIoStats(size_t max_cgroups, const IoStatWalk* last) const {
  IoStatWalk out;
  if (base_.empty()) return out;
  // Read with the directory's entry types, only subdirectories made into paths: a cgroup holds
  // 20-100 files, and a path object for each made a walk of 330 cgroups 6 ms (issue 47).
  std::vector<fs::path> to_visit{base_};  // depth first
  size_t seen = 0;
  while (!to_visit.empty() && seen < max_cgroups) {
    const fs::path dir = std::move(to_visit.back());
    to_visit.pop_back();
    ++seen;
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* entries = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (!entries) {
      if (fd >= 0) ::close(fd);
      continue;
    }
    std::vector<std::string> children;
    while (const dirent* e = ::readdir(entries)) {
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {  // a filesystem that does not say: asked, links not followed
        struct stat st {};
        is_dir = ::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (is_dir && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        children.emplace_back(e->d_name);
    }
    const bool leaf = children.empty();
    // Its children have io.stat only where it hands them the io controller, and theirs only
    // where they hand it on: a subtree without it is not walked (systemd enables io only for
    // units that account it; most of a host's cgroups have none). A tree that does not say (a
    // test's fixture) is walked whole.
    std::optional<std::string> handed_down;
    if (!leaf) handed_down = readTextFileAt(fd, "cgroup.subtree_control");
    const bool descend = !handed_down || controllerListHas(*handed_down, "io");
    // Its own io.stat (the root's is the host's: never): a leaf's is what it did, an inner
    // cgroup's what its subtree did, read only where its children have theirs.
    std::optional<std::vector<IoStat>> own;
    if (dir != base_ && (leaf || descend)) {
      if (auto text = readTextFileAt(fd, "io.stat")) own = parseIoStat(*text);
    }
    ::closedir(entries);
    if (leaf) {
      if (own && !own->empty()) out.leaves.emplace(dir, std::move(*own));
      continue;
    }
    if (!descend) continue;
    const auto idle = [&] {  // no I/O below it since LAST
      if (!own || !last) return false;
      const auto before = last->inner.find(dir);
      return before != last->inner.end() && sameIo(before->second, *own);
    };
    if (idle()) {
      // Its leaves as they were: the paths under DIR sort right after it.
      const std::string prefix = dir.native() + "/";
      for (auto it = last->leaves.upper_bound(dir);
           it != last->leaves.end() && it->first.native().starts_with(prefix); ++it)
        out.leaves.insert(*it);
    } else {
      for (const std::string& child : children) to_visit.push_back(dir / child);
    }
    if (own) out.inner.emplace(dir, std::move(*own));
  }
  return out;
}

std::string encodeDeviceUsers(const std::vector<DeviceUser>& users) {
  std::string out;
  for (const DeviceUser& u : users) {
    char rates[64];
    std::snprintf(rates, sizeof rates, "%.0f\t%.0f", u.read_bytes_per_second,
                  u.write_bytes_per_second);
    out += (out.empty() ? "" : "\n") + u.device + "\t" + u.cgroup + "\t" + rates;
  }
  return out;
}

std::vector<DeviceUser> parseDeviceUsers(std::string_view text) {
  std::vector<DeviceUser> out;
  // Split on tabs, not on whitespace as splitFields does: a cgroup's name may hold a space.
  forEachLine(text, [&](std::string_view line, size_t) {
    std::string_view f[4];
    size_t n = 0, at = 0;
    while (n < 4 && at <= line.size()) {
      const size_t tab = std::min(line.find('\t', at), line.size());
      f[n++] = line.substr(at, tab - at);
      at = tab + 1;
    }
    if (n != 4 || f[0].empty() || f[1].empty()) return;
    const auto read = parseUnsigned(f[2]), write = parseUnsigned(f[3]);
    if (!read || !write) return;
    out.push_back({std::string(f[0]), std::string(f[1]), static_cast<double>(*read),
                   static_cast<double>(*write)});
  });
  return out;
}

std::vector<DeviceUser> deviceUsers(const std::map<fs::path, std::vector<IoStat>>& previous,
                                    const std::map<fs::path, std::vector<IoStat>>& current,
                                    double elapsed_seconds, const std::set<Devnum>& devices,
                                    const std::set<fs::path>& exclude, const fs::path& base,
                                    const std::function<std::string(uint32_t, uint32_t)>& name_of,
                                    size_t top, double floor) {
  std::map<Devnum, std::vector<DeviceUser>> by_device;
  if (!(elapsed_seconds > 0)) return {};
  for (const auto& [dir, now] : current) {
    if (exclude.count(dir)) continue;
    auto before = previous.find(dir);
    if (before == previous.end()) continue;
    for (const IoStat& n : now) {
      const Devnum dev{n.major, n.minor};
      if (!devices.count(dev)) continue;
      for (const IoStat& b : before->second) {
        if (b.major != n.major || b.minor != n.minor) continue;
        DeviceUser u;
        u.read_bytes_per_second =
            perSecond(static_cast<double>(forwardDelta(b.rbytes, n.rbytes)), elapsed_seconds)
                .value_or(0);
        u.write_bytes_per_second =
            perSecond(static_cast<double>(forwardDelta(b.wbytes, n.wbytes)), elapsed_seconds)
                .value_or(0);
        if (u.bytes_per_second() < floor) break;
        u.device = name_of(n.major, n.minor);
        if (u.device.empty()) u.device = std::to_string(n.major) + ":" + std::to_string(n.minor);
        u.cgroup = "/" + dir.lexically_relative(base).string();
        by_device[dev].push_back(std::move(u));
        break;
      }
    }
  }
  std::vector<DeviceUser> out;
  for (auto& [dev, users] : by_device) {
    std::sort(users.begin(), users.end(), [](const DeviceUser& a, const DeviceUser& b) {
      return a.bytes_per_second() > b.bytes_per_second();
    });
    if (users.size() > top) users.resize(top);
    out.insert(out.end(), users.begin(), users.end());
  }
  return out;
}

CgroupFigures cgroupFigures(const std::map<fs::path, CgroupReading>& previous,
                            const std::map<fs::path, CgroupReading>& current,
                            double elapsed_seconds) {
  CgroupFigures f;
  if (!(elapsed_seconds > 0)) return f;
  auto higher = [](std::optional<double>& into, std::optional<double> v) {
    if (v && (!into || *v > *into)) into = v;
  };
  auto some = [&](const std::optional<PressureStats>& a, const std::optional<PressureStats>& b) {
    if (!a || !b || !a->some || !b->some) return std::optional<double>();
    return stallRatio(a->some->total_us, b->some->total_us, elapsed_seconds);
  };
  double nearest_limit = -1;  // the share of its limit the closest cgroup reached
  for (const auto& [dir, now] : current) {
    auto before = previous.find(dir);
    if (before == previous.end()) continue;
    const CgroupReading& was = before->second;
    if (!now.ancestor) {  // a cgroup above the job's is every tenant's: not the job's pressure
      higher(f.io_some, some(was.io, now.io));
      higher(f.cpu_some, some(was.cpu, now.cpu));
      higher(f.memory_some, some(was.memory, now.memory));
    }
    if (was.cpu_stat && now.cpu_stat && now.cpu_stat->throttled_us >= was.cpu_stat->throttled_us) {
      higher(f.cpu_throttled_ratio, std::min(1.0, static_cast<double>(now.cpu_stat->throttled_us -
                                                                      was.cpu_stat->throttled_us) /
                                                      (elapsed_seconds * 1e6)));
    }
    for (const IoLimit& limit : now.io_max) {
      if (!limit.rbps && !limit.riops) continue;
      auto stat_of = [&](const std::vector<IoStat>& stats) -> const IoStat* {
        for (const auto& s : stats) {
          if (s.major == limit.major && s.minor == limit.minor) return &s;
        }
        return nullptr;
      };
      const IoStat* a = stat_of(was.io_stat);
      const IoStat* b = stat_of(now.io_stat);
      if (!a || !b || b->rbytes < a->rbytes || b->rios < a->rios) continue;
      const double bytes = static_cast<double>(b->rbytes - a->rbytes) / elapsed_seconds;
      const double ios = static_cast<double>(b->rios - a->rios) / elapsed_seconds;
      const double share = std::max(limit.rbps ? bytes / static_cast<double>(*limit.rbps) : 0.0,
                                    limit.riops ? ios / static_cast<double>(*limit.riops) : 0.0);
      if (share > nearest_limit) {
        nearest_limit = share;
        f.limited_read_bytes_per_second = bytes;
        f.read_limit_bytes_per_second.reset();
        if (limit.rbps) f.read_limit_bytes_per_second = static_cast<double>(*limit.rbps);
        f.read_limit_cgroup = dir;
        f.read_limit = limit;
      }
    }
  }
  return f;
}

std::string notACgroupV2(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "not a directory";
  constexpr long kCgroupV1Magic = 0x27e0eb;  // CGROUP_SUPER_MAGIC (linux/magic.h)
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kCgroupV1Magic) {
    return "a cgroup v1 hierarchy: stallwatch follows cgroup v2 directories (the unified "
           "hierarchy, usually under /sys/fs/cgroup)";
  }
  if (!std::filesystem::exists(dir / "cgroup.procs", ec))
    return "not a cgroup v2 directory (it has no cgroup.procs)";
  return {};
}

}  // namespace stallwatch::collectors
