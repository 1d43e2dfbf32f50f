// The jobs collector's view of what a job reads: its open files mapped to devices, who else
// uses those devices (other cgroups, other processes), and the cgroups the job runs in with the
// limits set on them.
#include <sys/stat.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "collectors/jobs/jobs.h"
#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

// Other processes are looked at where a job's device moved this many bytes/s more than the job
// and other cgroups account for; at most this many processes a walk, and this many descriptors
// of each candidate for the device it uses.
constexpr double kProcessNeighbourFloor = 10e6;
constexpr size_t kMaxProcessesWalked = 8192;
constexpr size_t kMaxNeighbourFiles = 64;

// Which of the io and memory controllers cgroup DIR (v2) has: its cgroup.controllers names
// them. Only with io does the block layer tag its processes' I/O with DIR's own id rather than
// an ancestor's; with memory, the pages they bring in or allocate are charged to DIR (issue 47:
// a request's first page then names the job where its bio does not).
struct Controllers {
  bool io = false, memory = false;
};
Controllers controllersOf(const std::filesystem::path& dir) {
  Controllers c;
  const auto text = readTextFile(dir / "cgroup.controllers");
  if (!text) return c;
  c.io = controllerListHas(*text, "io");
  c.memory = controllerListHas(*text, "memory");
  return c;
}

}  // namespace

// The members of every job whose open files were looked at longest ago (never first), within
// the per-tick budget; each keeps what it was found to hold.
void JobTracker::scanOpenFiles() {
  if (!tree_) return;
  std::vector<std::tuple<uint64_t, Job*, uint32_t>> order;
  for (auto& [key, job] : jobs_) {
    for (const auto& [pid, m] : job.members) order.emplace_back(m.files_scanned_tick, &job, pid);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::map<const Job*, std::optional<std::vector<MountInfo>>> mounts_of;
  size_t budget = options_.open_files_per_discovery;
  for (const auto& [tick, job, pid] : order) {
    if (budget == 0) break;
    Member& m = job->members.at(pid);
    m.files_scanned_tick = ticks_;
    // As many open as at the last read, and that read recent: what it found still holds (a
    // file closed and another opened in its place waits for the next read, at most
    // open_files_reread_ticks away).
    const auto count = reader_.openFileCount(pid);
    if (count && count == m.open_file_count && m.files_read_tick != 0 &&
        ticks_ - m.files_read_tick < options_.open_files_reread_ticks) {
      --budget;
      continue;
    }
    m.open_file_count = count;
    m.files_read_tick = ticks_;
    // Paths resolve in the job's mount namespace, the one of its first process.
    auto [at, inserted] = mounts_of.try_emplace(job);
    if (inserted) at->second = reader_.mounts(job->description.root_pid);
    m.files_per_device.clear();
    size_t examined = 0;
    // What a worker inherited from a member it was forked from is counted on that member.
    std::optional<uint32_t> parent;
    if (job->members.count(m.stat.ppid)) parent = m.stat.ppid;
    const auto files =
        at->second ? reader_.openFiles(pid, options_.max_open_files_per_process, &examined, parent)
                   : std::vector<std::string>{};
    budget -= std::min(budget, std::max<size_t>(examined, 1));
    if (at->second) countFilesByDevice(files, *at->second, m.files_per_device);
  }
}

void JobTracker::countFilesByDevice(const std::vector<std::string>& files,
                                    const std::vector<MountInfo>& mounts,
                                    std::map<std::string, uint32_t>& files_per_device) const {
  for (const std::string& path : files) {
    // The longest mount point that is a prefix of the path.
    const MountInfo* best = nullptr;
    for (const auto& mount : mounts) {
      if (pathIsUnder(path, mount.mount_point) &&
          (!best || mount.mount_point.size() > best->mount_point.size())) {
        best = &mount;
      }
    }
    if (!best) continue;
    if (const BlockDevice* d = tree_->findByDevnum(best->major, best->minor))
      ++files_per_device[d->name];
  }
}

void JobTracker::addProcessNeighbours(const Job& job, const JobSample& sample,
                                      const std::vector<DiskSample>& disks, int64_t monotonic_ns,
                                      std::vector<DeviceUser>& users) {
  if (!tree_) return;
  // What no one accounts for on the busiest of the job's devices.
  const double own =
      sample.read_bytes_per_second.value_or(0) + sample.write_bytes_per_second.value_or(0);
  double unexplained = 0;
  for (const DiskSample& d : disks) {
    if (!job.devices.count({d.major, d.minor})) continue;
    double left = d.rates.read_bytes_per_second + d.rates.write_bytes_per_second - own;
    for (const DeviceUser& u : users) left -= u.device == d.device ? u.bytes_per_second() : 0;
    unexplained = std::max(unexplained, left);
  }
  if (unexplained < kProcessNeighbourFloor) return;
  if (process_io_tick_ != ticks_) {  // one walk a tick, for every job that needs it
    std::set<uint32_t> members;
    for (const auto& [key, other] : jobs_) {
      for (const auto& [pid, m] : other.members) members.insert(pid);
    }
    std::map<uint32_t, ProcessIoReading> walk;
    size_t walked = 0;
    for (uint32_t pid : reader_.allPids()) {
      if (members.count(pid) || pid == self_pid_ || walked++ >= kMaxProcessesWalked) continue;
      const auto io = reader_.io(pid);
      if (!io || io->read_bytes + io->write_bytes == 0) continue;
      walk[pid] = {reader_.comm(pid), io->read_bytes, io->write_bytes};
    }
    // Rates only against the walk one discovery period before (an older one is dropped).
    const bool consecutive =
        process_io_ns_ != 0 && ticks_ - process_io_tick_ <= options_.discovery_every_ticks;
    busiest_commands_ =
        consecutive ? busiestCommands(process_io_, walk,
                                      static_cast<double>(monotonic_ns - process_io_ns_) / 1e9)
                    : std::vector<CommandIo>{};
    process_io_ = std::move(walk);
    process_io_ns_ = monotonic_ns;
    process_io_tick_ = ticks_;
  }
  // Named on a device of the job only if one of its processes holds a file there.
  for (const CommandIo& c : busiest_commands_) {
    std::string device;
    for (size_t k = 0; k < c.pids.size() && k < 2 && device.empty(); ++k) {
      const auto mounts = reader_.mounts(c.pids[k]);
      if (!mounts) continue;
      std::map<std::string, uint32_t> on;
      countFilesByDevice(reader_.openFiles(c.pids[k], kMaxNeighbourFiles), *mounts, on);
      for (const auto& [name, count] : on) {
        const BlockDevice* d = tree_->find(name);
        if (d && d->major && job.devices.count({*d->major, *d->minor})) {
          device = name;
          break;
        }
      }
    }
    if (device.empty()) continue;
    users.push_back(
        {device, processUserName(c.comm), c.read_bytes_per_second, c.write_bytes_per_second});
  }
}

// The job's devices: what its members held at their last scans.
void JobTracker::describeDevices(Job& job, SampleBatch& out) {
  if (!tree_) return;
  std::map<std::string, uint32_t> files_per_device;
  for (const auto& [pid, m] : job.members) {
    for (const auto& [name, count] : m.files_per_device) files_per_device[name] += count;
  }
  job.devices.clear();
  for (const auto& [name, count] : files_per_device) {
    const BlockDevice* d = tree_->find(name);
    if (!d || !d->major) continue;  // gone from the tree since that member's scan
    out.job_devices.push_back({job.description.key, name, *d->major, *d->minor, {}, count});
    job.devices.insert({*d->major, *d->minor});
    // Under a block device, the physical devices at the bottom of its stack; under an overlay
    // (a container's files), every layer down, so that the loop device it sits on is named too.
    const auto below_list =
        d->kind == BlockKind::kOverlay ? tree_->devicesBelow(name) : tree_->physicalDevices(name);
    for (const std::string& below : below_list) {
      const BlockDevice* p = tree_->find(below);
      if (below == name || !p || !p->major) continue;
      out.job_devices.push_back({job.description.key, below, *p->major, *p->minor, name, count});
      job.devices.insert({*p->major, *p->minor});
    }
  }
}

// The ids of the job's cgroups and memory cgroups, and which controllers they have (how the
// per-I/O collector tells the job's requests).
void JobTracker::identifyCgroups(Job& job) {
  job.cgroups_have_io = true;
  job.cgroups_have_memory = true;
  job.memory_cgroup_ids.clear();
  // Each cgroup once, however many ranks share it: its id, as the block layer tags the job's
  // I/O (the directory's inode; not the root cgroup's, which is everyone's), and whether it has
  // the io and memory controllers (with memory, its id is also its memory cgroup's).
  std::set<std::filesystem::path> without_memory;
  for (const auto& dir : job.cgroups) {
    struct stat st {};
    const bool known = dir != cgroups_.base() && ::stat(dir.c_str(), &st) == 0;
    if (known) job.cgroup_ids.insert(static_cast<uint64_t>(st.st_ino));
    const Controllers c = controllersOf(dir);
    job.cgroups_have_io = job.cgroups_have_io && c.io;
    if (c.memory && known) {
      job.memory_cgroup_ids.insert(static_cast<uint64_t>(st.st_ino));
    } else {
      without_memory.insert(dir);
    }
  }
  // A hybrid host's memory controller is v1's: a root process whose v2 cgroup has none is
  // charged in its v1 memory cgroup, the job's own where it mirrors the v2 one.
  for (const auto& [pid, dir] : job.cgroup_of_root) {
    if (!without_memory.count(dir)) continue;
    struct stat st {};
    const auto mirror = cgroups_.mirroredMemoryCgroupOf(pid);
    if (mirror && ::stat(mirror->c_str(), &st) == 0) {
      job.memory_cgroup_ids.insert(static_cast<uint64_t>(st.st_ino));
    } else {
      job.cgroups_have_memory = false;
    }
  }
}

void JobTracker::readCgroups(Job& job, bool discovery, double elapsed, JobSample& sample) {
  if (!cgroups_.available()) return;
  const bool look_up = discovery || !job.cgroups_looked_up;
  if (look_up) {
    job.cgroups_looked_up = true;
    job.cgroups.clear();
    job.cgroup_of_root.clear();
    job.cgroup_ids.clear();
    for (const auto& [pid, m] : job.members) {
      if (!m.root) continue;
      if (auto dir = cgroups_.cgroupOf(pid)) {
        job.cgroups.insert(*dir);
        job.cgroup_of_root[pid] = *dir;
      }
    }
    identifyCgroups(job);
    // The cgroups above them: a limit there binds the job as much as one on its own.
    job.ancestors.clear();
    for (const auto& dir : job.cgroups) {
      int level = 0;
      for (const auto& up : cgroups_.ancestorsOf(dir)) {
        ++level;
        if (job.cgroups.count(up)) break;  // one of the job's own (a rank's parent cgroup)
        auto [it, inserted] = job.ancestors.emplace(up, level);
        if (!inserted) it->second = std::min(it->second, level);
      }
    }
    job.ancestor_limits.clear();
    for (const auto& [dir, level] : job.ancestors) {
      CgroupReading limits = cgroups_.readLimits(dir);
      if (limits.anyLimit()) job.ancestor_limits.emplace(dir, std::move(limits));
    }
    job.cpus_affinity.reset();
    for (const auto& [pid, m] : job.members) {
      if (!m.root) continue;
      if (const auto n = cgroups_.cpusAllowed(pid);
          n && (!job.cpus_affinity || *n < *job.cpus_affinity))
        job.cpus_affinity = n;
    }
  }
  std::map<std::filesystem::path, CgroupReading> now;
  std::string limits;
  auto name_of = [this](uint32_t major, uint32_t minor) -> std::string {
    const BlockDevice* d = tree_ ? tree_->findByDevnum(major, minor) : nullptr;
    return d ? d->name : "";
  };
  auto describe = [&](const CgroupReading& r, const std::string& where) {
    for (const std::string& text :
         {describeIoLimits(r.io_max, where, name_of), describeCpuLimit(r.cpu_max, where),
          describeMemoryLimits(r, where)}) {
      if (!text.empty()) limits += (limits.empty() ? "" : "; ") + text;
    }
  };
  std::optional<double> quota_cpus;  // the tightest CPU quota over the job
  auto quota = [&](const CgroupReading& r) {
    if (!r.cpu_max || !r.cpu_max->quota_us) return;
    const double cpus =
        static_cast<double>(*r.cpu_max->quota_us) / static_cast<double>(r.cpu_max->period_us);
    if (!quota_cpus || cpus < *quota_cpus) quota_cpus = cpus;
  };
  for (const auto& dir : job.cgroups) {
    CgroupReading r = cgroups_.read(dir);
    describe(r, dir.string());
    quota(r);
    now.emplace(dir, std::move(r));
  }
  for (const auto& [dir, level] : job.ancestors) {
    // Their limits as the last discovery tick found them; io.max read every tick (one small
    // file each: a read limit set on a parent is news at once, as one on the job's own is).
    CgroupReading r;
    r.ancestor = true;
    if (auto known = job.ancestor_limits.find(dir); known != job.ancestor_limits.end())
      r = known->second;
    if (!look_up) {
      r.io_max.clear();
      if (auto t = readTextFile(dir / "io.max")) r.io_max = parseIoMax(*t);
    }
    if (!r.anyLimit()) continue;
    // What the limits need every tick: the reads against io.max, the throttling of cpu.max.
    if (auto t = readTextFile(dir / "io.stat")) r.io_stat = parseIoStat(*t);
    if (auto t = readTextFile(dir / "cpu.stat")) r.cpu_stat = parseCpuStat(*t);
    describe(r, cgroupWhere(dir, level));
    quota(r);
    now.emplace(dir, std::move(r));
  }
  const CgroupFigures f = cgroupFigures(job.cgroup_readings, now, elapsed);
  // Each rank's own: its main process's cgroup and the cgroups above it, where the ranks have
  // cgroups of their own (one of them limited: the straggler, named without the hook).
  job.rank_cgroup_figures.clear();
  if (job.cgroups.size() >= 2) {
    std::map<int32_t, std::set<std::filesystem::path>> dirs_of_rank;
    for (const auto& [pid, dir] : job.cgroup_of_root) {
      auto m = job.members.find(pid);
      if (m == job.members.end() || !m->second.rank) continue;
      dirs_of_rank[*m->second.rank].insert(dir);
    }
    for (const auto& [rank, dirs] : dirs_of_rank) {
      std::map<std::filesystem::path, CgroupReading> before, after;
      for (const auto& [dir, reading] : now) {
        if (!reading.ancestor && !dirs.count(dir)) continue;  // another rank's
        if (reading.ancestor && !job.ancestors.count(dir)) continue;
        after.emplace(dir, reading);
        if (auto b = job.cgroup_readings.find(dir); b != job.cgroup_readings.end())
          before.emplace(dir, b->second);
      }
      job.rank_cgroup_figures[rank] = cgroupFigures(before, after, elapsed);
    }
  }
  sample.cgroup_io_some = f.io_some;
  sample.cgroup_cpu_some = f.cpu_some;
  sample.cgroup_memory_some = f.memory_some;
  sample.cgroup_cpu_throttled_ratio = f.cpu_throttled_ratio;
  sample.cgroup_limited_read_bytes_per_second = f.limited_read_bytes_per_second;
  sample.cgroup_read_limit_bytes_per_second = f.read_limit_bytes_per_second;
  if (f.read_limit && f.read_limit_cgroup) {
    auto level = job.ancestors.find(*f.read_limit_cgroup);
    sample.cgroup_read_limit = describeIoLimits(
        {*f.read_limit},
        cgroupWhere(*f.read_limit_cgroup, level == job.ancestors.end() ? 0 : level->second),
        name_of);
  }
  sample.cgroup_limits = limits;
  if (job.cpus_affinity || quota_cpus) {
    sample.cpus_allowed =
        std::min(job.cpus_affinity ? static_cast<double>(*job.cpus_affinity) : 1e9,
                 quota_cpus.value_or(1e9));
  }
  job.cgroup_readings = std::move(now);
  if (limits != job.description.cgroup_limits) {
    job.description.cgroup_limits = limits;
    job.changed = true;
  }
}

}  // namespace stallwatch::collectors
