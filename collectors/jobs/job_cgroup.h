// A job's own cgroup (v2): the limits set on it and what it did against them, so that a
// throttle is named rather than inferred from the node's pressure (which any other tenant
// moves). Source: Documentation/admin-guide/cgroup-v2.rst.
//   io.max      "254:0 rbps=4194304 wbps=max riops=max wiops=max", one line per device
//   io.stat     "254:0 rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N", cumulative
//   cpu.max     "QUOTA PERIOD" in µs, QUOTA "max" for none
//   cpu.stat    "usage_usec N", "nr_throttled N", "throttled_usec N", ...
//   memory.max, memory.high  bytes, or "max" for none
//   io.pressure, cpu.pressure, memory.pressure: PSI lines, as /proc/pressure/* (pressure.h)
// A limit set on a cgroup above the job's (a Kubernetes pod's, a systemd slice's, a tenant's)
// binds the job as much as its own: the cgroups on the path up to the root are read too.
// The cgroup of a process is the "0::PATH" line of /proc/PID/cgroup, under the cgroup2 mount.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/host/pressure.h"
#include "collectors/samples.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

struct IoLimit {
  uint32_t major = 0, minor = 0;
  std::optional<uint64_t> rbps, wbps, riops, wiops;  // none: "max"
  bool any() const { return rbps || wbps || riops || wiops; }
};
struct IoStat {
  uint32_t major = 0, minor = 0;
  uint64_t rbytes = 0, wbytes = 0, rios = 0, wios = 0;
};
// One walk of the cgroup tree's io.stat, by directory: the leaf cgroups' (who did the I/O) and
// the inner ones' on the way (each the sum of its subtree, for the next walk to skip the idle).
struct IoStatWalk {
  std::map<std::filesystem::path, std::vector<IoStat>> leaves, inner;
};
struct CpuMax {
  std::optional<uint64_t> quota_us;  // none: "max"
  uint64_t period_us = 100000;
};
struct CpuStat {
  uint64_t usage_us = 0, throttled_us = 0, nr_throttled = 0;
};

// Pure parsers; lines they cannot read are skipped (a device line with a field of another
// kernel is read for the fields it knows).
std::vector<IoLimit> parseIoMax(std::string_view text);
std::vector<IoStat> parseIoStat(std::string_view text);
std::optional<CpuMax> parseCpuMax(std::string_view text);
std::optional<CpuStat> parseCpuStat(std::string_view text);
// The v2 path ("/job/rank1") from /proc/PID/cgroup, or none on a v1-only host.
std::optional<std::string> cgroupV2Path(std::string_view proc_pid_cgroup);
// Whether a cgroup's cgroup.controllers or cgroup.subtree_control text ("cpu io memory")
// names CONTROLLER.
bool controllerListHas(std::string_view text, std::string_view controller);
// The path of a /proc/PID/cgroup text's cgroup v1 hierarchy that holds CONTROLLER (a hybrid
// host's "4:memory:/user.slice/..."; "7:cpu,cpuacct:/..." holds two); none without one.
std::optional<std::string> cgroupV1Path(std::string_view proc_pid_cgroup,
                                        std::string_view controller);

// memory.max or memory.high: bytes, none for "max" (or unreadable).
std::optional<uint64_t> parseMemoryLimit(std::string_view text);
// "0-3,8,10-11" (Cpus_allowed_list, cpuset.cpus): how many CPUs; none if malformed.
std::optional<uint32_t> countCpuList(std::string_view text);

// One reading of a cgroup's files.
struct CgroupReading {
  std::optional<PressureStats> io, cpu, memory;
  std::vector<IoLimit> io_max;
  std::vector<IoStat> io_stat;
  std::optional<CpuMax> cpu_max;
  std::optional<CpuStat> cpu_stat;
  std::optional<uint64_t> memory_max, memory_high;
  // A cgroup above the job's: its limits bind the job, its pressure is every tenant's and is
  // not taken for the job's own.
  bool ancestor = false;
  bool anyLimit() const;
};

// What a job's cgroups say over an interval: their own pressure (the highest of them), the
// share of the interval the CPU quota throttled them, and the reads of the cgroup that is
// nearest its io.max limit, on the limited device.
struct CgroupFigures {
  std::optional<double> io_some, cpu_some, memory_some;
  std::optional<double> cpu_throttled_ratio;
  std::optional<double> limited_read_bytes_per_second;  // on the device io.max limits
  std::optional<double> read_limit_bytes_per_second;    // that limit (rbps)
  // The cgroup whose io.max was nearest its use, and that limit's line (the job's own cgroup,
  // or one above it whose io.stat sums every cgroup below).
  std::optional<std::filesystem::path> read_limit_cgroup;
  std::optional<IoLimit> read_limit;
};

// The limits as people read them: "io.max 254:0 rbps=4194304 in /sys/fs/cgroup/job",
// "cpu.max 50000 100000 (0.5 CPU) in ..."; "" when the cgroup sets none.
// NAME_OF gives a device's name from its number ("" if unknown).
std::string describeIoLimits(const std::vector<IoLimit>& limits, const std::string& where,
                             const std::function<std::string(uint32_t, uint32_t)>& name_of);
std::string describeCpuLimit(const std::optional<CpuMax>& cpu, const std::string& where);
// "memory.max 8.0 GiB in ...", "memory.high ..." joined by "; "; "" when neither is set.
std::string describeMemoryLimits(const CgroupReading& r, const std::string& where);
// Where a cgroup sits for people: DIR, and with LEVELS_UP > 0 "(parent of the job's cgroup)" or
// "(N levels above the job's cgroup)".
std::string cgroupWhere(const std::filesystem::path& dir, int levels_up);

// Who else used a device over an interval: one cgroup's reads and writes on it (issue 16's
// noisy neighbours), from the io.stat of the cgroups where processes live.
struct DeviceUser {
  std::string device;  // its name in the device tree
  std::string cgroup;  // its path under the cgroup2 mount: "/system.slice/backup.service"
  double read_bytes_per_second = 0;
  double write_bytes_per_second = 0;
  double bytes_per_second() const { return read_bytes_per_second + write_bytes_per_second; }
  bool operator==(const DeviceUser&) const = default;
};
// As stored, one user a line: "DEVICE<TAB>CGROUP<TAB>READ<TAB>WRITE" (bytes/s). The parser
// skips lines it cannot read.
std::string encodeDeviceUsers(const std::vector<DeviceUser>& users);
std::vector<DeviceUser> parseDeviceUsers(std::string_view text);

using Devnum = std::pair<uint32_t, uint32_t>;
// The heaviest users of each device in DEVICES between two readings of the leaf cgroups'
// io.stat (by directory), leaving out the cgroups in EXCLUDE (the job's own): at most TOP per
// device, each at least FLOOR bytes/s, heaviest first. BASE is the cgroup2 mount (stripped
// from the names); NAME_OF names a device.
std::vector<DeviceUser> deviceUsers(
    const std::map<std::filesystem::path, std::vector<IoStat>>& previous,
    const std::map<std::filesystem::path, std::vector<IoStat>>& current, double elapsed_seconds,
    const std::set<Devnum>& devices, const std::set<std::filesystem::path>& exclude,
    const std::filesystem::path& base,
    const std::function<std::string(uint32_t, uint32_t)>& name_of, size_t top = 3,
    double floor = 1e6);

// Why DIR cannot be followed as a job's cgroup ("" where it can): not a directory, a cgroup v1
// hierarchy, or no cgroup.procs in it (/etc, a typo).
std::string notACgroupV2(const std::filesystem::path& dir);

// Reads the cgroups of the jobs' processes under the cgroup2 mount of ROOT.
class CgroupReader {
 public:
  explicit CgroupReader(const SystemRoot& root);
  bool available() const { return !base_.empty(); }
  // PID's cgroup v2 path as /proc/PID/cgroup gives it ("/kubepods.slice/..."), whether or not
  // the cgroup2 mount is readable here; none without a v2 entry.
  std::optional<std::string> pathOf(uint32_t pid) const;
  // The cgroup directory of PID (ROOT/proc/PID/cgroup), or none (none either for the root
  // cgroup, which is the node's).
  std::optional<std::filesystem::path> cgroupOf(uint32_t pid) const;
  // PID's cgroup in a hybrid host's cgroup v1 memory hierarchy, where it mirrors its v2 cgroup
  // (the same path, as systemd and container runtimes keep them): the memory cgroup charged for
  // its pages, its unit's own. None elsewhere: no v1 memory hierarchy, the root, or another path
  // (an ancestor others share).
  std::optional<std::filesystem::path> mirroredMemoryCgroupOf(uint32_t pid) const;
  CgroupReading read(const std::filesystem::path& dir) const;
  // Only the limits of DIR (io.max, cpu.max, memory.max, memory.high): the cgroups above a
  // job's, looked at once a discovery period; those that set one are read whole every tick.
  CgroupReading readLimits(const std::filesystem::path& dir) const;
  // The cgroups above DIR, nearest first, up to (not including) the cgroup2 mount's root.
  std::vector<std::filesystem::path> ancestorsOf(const std::filesystem::path& dir) const;
  // How many CPUs PID may run on (Cpus_allowed_list of ROOT/proc/PID/status); none if unknown.
  std::optional<uint32_t> cpusAllowed(uint32_t pid) const;
  // The io.stat of every leaf cgroup (one without child cgroups: where processes are), by
  // directory, walking at most MAX_CGROUPS cgroups; only those with I/O on some device. An
  // inner cgroup's io.stat sums its subtree's: where it has not moved since LAST, the subtree
  // is not walked again and its leaves' readings are carried over (issue 47: a Kubernetes
  // node's idle pods). Its files live in memory: no disk is touched.
  IoStatWalk leafIoStats(size_t max_cgroups, const IoStatWalk* last = nullptr) const;
  const std::filesystem::path& base() const { return base_; }

 private:
  std::filesystem::path proc_;
  std::filesystem::path base_;       // where the cgroup2 hierarchy is mounted, under ROOT
  std::filesystem::path memory_v1_;  // where a v1 memory hierarchy is (hybrid hosts), or empty
};

// The figures of an interval from the previous and current readings of each of a job's
// cgroups (by directory); cgroups seen only once give none yet.
CgroupFigures cgroupFigures(const std::map<std::filesystem::path, CgroupReading>& previous,
                            const std::map<std::filesystem::path, CgroupReading>& current,
                            double elapsed_seconds);

}  // namespace stallwatch::collectors
