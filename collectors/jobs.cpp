#include "collectors/jobs.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "collectors/counter_rates.h"
#include "collectors/kubernetes_pod.h"

namespace stallwatch::collectors {
namespace {

constexpr int kMaxAncestorDepth = 64;
// The cgroup tree walked for who else uses the jobs' devices: a bound on a node with thousands.
constexpr size_t kMaxCgroupsWalked = 1024;
// Other processes are looked at where a job's device moved this many bytes/s more than the job
// and other cgroups account for; at most this many processes a walk, and this many descriptors
// of each candidate for the device it uses.
constexpr double kProcessNeighbourFloor = 10e6;
constexpr size_t kMaxProcessesWalked = 8192;
constexpr size_t kMaxNeighbourFiles = 64;
constexpr size_t kMaxCmdlineBytes = 512;

// The text counted most often in COUNTS, which is not empty.
std::string mostCommon(const std::map<std::string, uint32_t>& counts) {
  return std::max_element(counts.begin(), counts.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

std::string joinCmdline(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (out.size() >= kMaxCmdlineBytes) break;
    out += (out.empty() ? "" : " ") + a;
  }
  return out.substr(0, kMaxCmdlineBytes);
}

// A short name for people: "python3 train.py" rather than the whole command line.
std::string labelFromCmdline(const std::vector<std::string>& args, const std::string& comm) {
  constexpr size_t kMaxLabelBytes = 80;
  if (args.empty()) return comm;
  std::string label = std::filesystem::path(args[0]).filename().string();
  for (size_t i = 1; i < args.size() && i < 3; ++i) label += " " + args[i];
  // One line for a table: control characters (a `python -c` script's newlines) become spaces.
  for (char& c : label) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (label.size() > kMaxLabelBytes) label = label.substr(0, kMaxLabelBytes - 3) + "...";
  return label;
}

std::string jobLabels(const std::map<std::string, std::string>& env) {
  static const char* kKeys[] = {"SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID",
                                "RANK",         "LOCAL_RANK",    "WORLD_SIZE"};
  std::string out;
  for (const char* k : kKeys) {
    if (auto it = env.find(k); it != env.end())
      out += (out.empty() ? "" : ",") + std::string(k) + "=" + it->second;
  }
  return out;
}

std::optional<int32_t> parseRank(const std::string& text) {
  constexpr long kMaxRank = 1 << 24;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0 || v > kMaxRank) return std::nullopt;
  return static_cast<int32_t>(v);
}

}  // namespace

// Figures summed over a set of processes for one interval.
struct JobTracker::Totals {
  double main_cpu = 0, workers_cpu = 0, read_bytes = 0, write_bytes = 0, rchar = 0, syscr = 0;
  bool io_known = false;
  uint32_t processes = 0, workers = 0, d_state = 0;
  std::map<std::string, uint32_t> wchans;
  std::map<std::string, uint32_t> sleep_wchans;  // the job's main processes' sleeping main threads
  DataloaderTotals reported;
  bool any_reported = false;
};

std::string jobKeyFromEnvironment(const std::map<std::string, std::string>& env) {
  if (auto it = env.find("SLURM_JOB_ID"); it != env.end() && !it->second.empty()) {
    auto step = env.find("SLURM_STEP_ID");
    return "slurm:" + it->second + (step != env.end() ? "." + step->second : "");
  }
  if (auto it = env.find("TORCHELASTIC_RUN_ID"); it != env.end() && !it->second.empty()) {
    return "torchelastic:" + it->second;
  }
  // torch.distributed started without torchrun (mp.spawn, a hand-written launcher): the
  // rendezvous address is what the ranks of one run share.
  auto addr = env.find("MASTER_ADDR"), port = env.find("MASTER_PORT");
  if (addr != env.end() && port != env.end() && !addr->second.empty() && !port->second.empty()) {
    return "dist:" + addr->second + ":" + port->second;
  }
  return {};
}

JobTracker::JobTracker(const SystemRoot& root, JobTrackerOptions options,
                       std::unique_ptr<GpuDriver> gpu)
    : reader_(root.proc),
      cgroups_(root),
      pod_logs_(root.pod_logs),
      options_(std::move(options)),
      gpu_(std::move(gpu)),
      clock_ticks_per_second_(::sysconf(_SC_CLK_TCK)) {
  if (options_.discovery_every_ticks == 0) options_.discovery_every_ticks = 1;
  self_pid_ = static_cast<uint32_t>(::getpid());
  if (gpu_ && options_.follow_gpu_processes && gpu_->init().ok()) {
    if (auto devices = gpu_->devices(); devices.ok())
      gpu_list_ = selectGpus(devices.value, options_.only_gpus);
  }
  if (options_.listen_dataloader) {
    socket_ = DataloaderSocket::open(options_.socket, socket_error_);
  }
}

JobTracker::Job* JobTracker::jobOf(uint32_t pid) {
  for (auto& [key, job] : jobs_) {
    if (job.members.count(pid)) return &job;
  }
  return nullptr;
}

void JobTracker::addMember(Job& job, uint32_t pid, bool root, SampleBatch& out) {
  if (root) job.cgroups_looked_up = false;  // its cgroup may be one the job was not in
  if (auto known = job.members.find(pid); known != job.members.end()) {
    known->second.root = known->second.root || root;  // no files opened again for it
    return;
  }
  if (job.members.size() >= options_.max_processes_per_job) return;
  auto files = std::make_unique<ProcessWatch>(reader_.dir(pid), options_.idle_thread_check_every);
  auto stat = files->stat();
  if (!stat) return;
  std::optional<int32_t> rank;
  const auto env = reader_.environ(pid);
  if (auto r = env.find("RANK"); r != env.end()) rank = parseRank(r->second);
  auto io = files->io();
  Member member;
  member.stat = *stat;
  member.io = io;
  member.root = root;
  member.rank = rank;
  member.files = std::move(files);
  job.members.emplace(pid, std::move(member));
  job.ranks_changed = true;
  out.job_processes.push_back({job.description.key, pid, root ? "main" : "worker", stat->comm});
}

std::optional<PodName> JobTracker::podOf(uint32_t pid) const {
  const auto path = cgroups_.pathOf(pid);
  const auto uid = path ? podUidFromCgroup(*path) : std::nullopt;
  return uid ? podByUid(pod_logs_, *uid) : std::nullopt;
}

std::optional<JobTracker::ProcessId> JobTracker::launcherOf(const ProcStat& stat) {
  if (stat.ppid <= 2) return std::nullopt;  // init, or kthreadd
  auto parent = reader_.stat(stat.ppid);
  if (!parent || parent->session == parent->pid) return std::nullopt;
  static const std::set<std::string> kManagers = {
      "systemd", "init", "containerd-shim", "containerd-shim-runc-v2", "tini", "dumb-init"};
  if (kManagers.count(parent->comm)) return std::nullopt;
  return ProcessId{parent->pid, parent->start_time_ticks};
}

// Puts PID into the job of its nearest tracked ancestor, or into the job its environment
// names, or into a new job of its own. FORCED_KEY (cgroups) overrides the environment.
JobTracker::Job* JobTracker::attach(uint32_t pid, const std::string& forced_key, int64_t now_ms,
                                    SampleBatch& out, bool sender) {
  if (Job* job = jobOf(pid)) return job;
  auto stat = reader_.stat(pid);
  if (!stat) return nullptr;
  uint32_t ancestor = stat->ppid;
  for (int depth = 0; ancestor > 1 && depth < kMaxAncestorDepth; ++depth) {
    if (Job* job = jobOf(ancestor)) {
      addMember(*job, pid, false, out);
      return job;
    }
    auto a = reader_.stat(ancestor);
    if (!a) break;
    ancestor = a->ppid;
  }
  const auto env = reader_.environ(pid);
  std::string key = forced_key.empty() ? jobKeyFromEnvironment(env) : forced_key;
  // In a Kubernetes pod without a run id of its own: the pod names the job, so that its
  // series keep one label for the pod's life.
  const auto pod = podOf(pid);
  if (key.empty() && pod) key = "k8s:" + pod->ns + "/" + pod->name;
  // Senders without a job label that one launcher forked are one job, keyed by the first of
  // them, for as long as the launcher lives (issue 19: a flood of short-lived senders made a
  // job each). A job whose senders have all exited comes back under the same key.
  std::optional<ProcessId> launcher;
  if (key.empty() && sender) {
    launcher = launcherOf(*stat);
    if (auto it = launcher ? launcher_jobs_.find(*launcher) : launcher_jobs_.end();
        it != launcher_jobs_.end()) {
      if (auto job = jobs_.find(it->second); job != jobs_.end()) {
        addMember(job->second, pid, true, out);
        return &job->second;
      }
      key = it->second;
    }
  }
  if (key.empty())
    key = "pid:" + std::to_string(pid) + ":" + std::to_string(stat->start_time_ticks);
  if (jobs_.size() >= options_.max_jobs && !jobs_.count(key)) {
    ++jobs_refused_;
    return nullptr;
  }
  auto [it, inserted] = jobs_.try_emplace(key);
  Job& job = it->second;
  if (inserted) {
    const auto args = reader_.cmdline(pid);
    job.description.key = key;
    job.description.root_pid = pid;
    job.description.cmdline = joinCmdline(args);
    job.description.label = labelFromCmdline(args, stat->comm);
    job.description.labels = jobLabels(env);
    if (pod) {
      job.description.labels += (job.description.labels.empty() ? "" : ",") +
                                std::string("K8S_NAMESPACE=") + pod->ns + ",K8S_POD=" + pod->name;
    }
    job.description.started_ms = now_ms;
  }
  addMember(job, pid, true, out);
  if (launcher) launcher_jobs_[*launcher] = key;
  return &job;
}

void JobTracker::discover(int64_t now_ms, SampleBatch& out) {
  for (uint32_t pid : options_.pids) attach(pid, {}, now_ms, out);
  for (const auto& cgroup : options_.cgroups) {
    const std::string key = "cgroup:" + cgroup.string();
    for (uint32_t pid : reader_.cgroupProcs(cgroup)) {
      Job* job = jobOf(pid);
      if (!job) job = attach(pid, key, now_ms, out);
      // Everything in the cgroup belongs to it, whatever its parentage.
      if (job && job->description.key != key && jobs_.count(key))
        addMember(jobs_[key], pid, false, out);
    }
  }
  if (!gpu_list_.empty()) {
    for (const GpuInfo& g : gpu_list_) {
      auto processes = gpu_->computeProcesses(g.index);
      if (!processes.ok()) continue;
      for (const auto& p : processes.value) {
        Job* job = attach(p.pid, {}, now_ms, out);
        if (!job) continue;
        if (job->gpus.insert(g.uuid).second) {
          job->description.gpus.assign(job->gpus.begin(), job->gpus.end());
          job->changed = true;
        }
        // A rank may hold a context on another GPU too (a stray cuda:0): its GPU is the one
        // where it keeps the most memory.
        const uint64_t used = p.used_memory_bytes.value_or(0);
        auto [it, inserted] = job->gpu_of_pid.try_emplace(p.pid, g.uuid, used);
        if (!inserted && used > it->second.second) it->second = {g.uuid, used};
        if (auto m = job->members.find(p.pid); m != job->members.end() && !m->second.rank) {
          m->second.rank = static_cast<int32_t>(g.index);
        }
        job->ranks_changed = job->ranks_changed || inserted;
      }
    }
  }
}

void JobTracker::followChildren(Job& job, bool all_threads, SampleBatch& out) {
  // Between discovery ticks only the roots (ranks, launchers) are asked: they start the
  // DataLoader workers, again at every epoch; a worker's own children wait for discovery.
  std::vector<uint32_t> frontier;
  for (const auto& [pid, m] : job.members) {
    if (all_threads || m.root) frontier.push_back(pid);
  }
  while (!frontier.empty()) {
    const uint32_t pid = frontier.back();
    frontier.pop_back();
    auto member = job.members.find(pid);
    if (member == job.members.end()) continue;
    std::vector<uint32_t> children = member->second.files->children();
    if (all_threads) {
      const auto more = member->second.files->childrenOfThreads();
      children.insert(children.end(), more.begin(), more.end());
    }
    for (uint32_t child : children) {
      if (job.members.count(child) || job.members.size() >= options_.max_processes_per_job)
        continue;
      addMember(job, child, false, out);
      if (job.members.count(child)) frontier.push_back(child);
    }
  }
}

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

void JobTracker::readCgroups(Job& job, bool discovery, double elapsed, JobSample& sample) {
  if (!cgroups_.available()) return;
  if (discovery || !job.cgroups_looked_up) {
    job.cgroups_looked_up = true;
    job.cgroups.clear();
    for (const auto& [pid, m] : job.members) {
      if (!m.root) continue;
      if (auto dir = cgroups_.cgroupOf(pid)) job.cgroups.insert(*dir);
    }
  }
  std::map<std::filesystem::path, CgroupReading> now;
  std::string limits;
  auto name_of = [this](uint32_t major, uint32_t minor) -> std::string {
    const BlockDevice* d = tree_ ? tree_->findByDevnum(major, minor) : nullptr;
    return d ? d->name : "";
  };
  for (const auto& dir : job.cgroups) {
    CgroupReading r = cgroups_.read(dir);
    for (const std::string& text : {describeIoLimits(r.io_max, dir.string(), name_of),
                                    describeCpuLimit(r.cpu_max, dir.string())}) {
      if (!text.empty()) limits += (limits.empty() ? "" : "; ") + text;
    }
    now.emplace(dir, std::move(r));
  }
  const CgroupFigures f = cgroupFigures(job.cgroup_readings, now, elapsed);
  sample.cgroup_io_some = f.io_some;
  sample.cgroup_cpu_some = f.cpu_some;
  sample.cgroup_memory_some = f.memory_some;
  sample.cgroup_cpu_throttled_ratio = f.cpu_throttled_ratio;
  sample.cgroup_limited_read_bytes_per_second = f.limited_read_bytes_per_second;
  sample.cgroup_read_limit_bytes_per_second = f.read_limit_bytes_per_second;
  sample.cgroup_limits = limits;
  job.cgroup_readings = std::move(now);
  if (limits != job.description.cgroup_limits) {
    job.description.cgroup_limits = limits;
    job.changed = true;
  }
}

// The dataloader's datagrams since the last tick, per job and per rank of the sending process.
JobTracker::ReportedSteps JobTracker::drainDataloader(int64_t now_ms, SampleBatch& out) {
  ReportedSteps reported;
  if (!socket_) return reported;
  auto add = [](DataloaderTotals& sum, const DataloaderTotals& t) {
    sum.steps += t.steps;
    sum.samples += t.samples;
    sum.wait_seconds += t.wait_seconds;
    sum.step_seconds += t.step_seconds;
  };
  std::vector<std::tuple<Job*, uint32_t, DataloaderTotals>> by_sender;
  for (const auto& [pid, t] : socket_->drain()) {
    Job* job = pid != 0 ? attach(pid, {}, now_ms, out, /*sender=*/true) : nullptr;
    if (!job) continue;  // gone before it was ever seen: nothing to attribute it to
    add(reported.by_job[job->description.key], t);
    by_sender.emplace_back(job, pid, t);
  }
  // Each sender's rank, once every sender is attached (each job's ranks assigned once).
  std::set<Job*> assigned;
  for (auto& [job, pid, t] : by_sender) {
    if (assigned.insert(job).second) assignRanks(*job);
    if (auto m = job->members.find(pid); m != job->members.end() && m->second.rank) {
      add(reported.by_rank[{job->description.key, *m->second.rank}], t);
    }
  }
  return reported;
}

std::string JobTracker::finalReport() const {
  if (!socket_) return {};
  const auto s = socket_->stats();
  return "dataloader socket: " + std::to_string(s.datagrams) + " datagrams, " +
         std::to_string(s.metrics) + " metrics, " + std::to_string(s.malformed_lines) +
         " malformed lines, " + std::to_string(s.unknown_metrics) + " unknown metrics, " +
         std::to_string(s.oversized_datagrams) + " oversized datagrams, " +
         std::to_string(s.dropped_senders) + " from senders past the cap; " +
         std::to_string(jobs_refused_) + " processes not tracked past " +
         std::to_string(options_.max_jobs) + " jobs";
}

CollectResult JobTracker::collect(const Tick& tick, SampleBatch& out) {
  std::string notice;
  if (ticks_ == 0) {
    // Said once, at the first reading: where jobs can report their steps, or why they cannot.
    notice = socket_                 ? "dataloader socket at " + socket_->path().string()
             : socket_error_.empty() ? ""
                                     : "no dataloader socket: " + socket_error_;
  }
  const bool discovery = ticks_++ % options_.discovery_every_ticks == 0;
  const double elapsed = static_cast<double>(tick.monotonic_ns - last_tick_ns_) / 1e9;
  const bool have_interval = last_tick_ns_ != 0 && elapsed > 0;
  last_tick_ns_ = tick.monotonic_ns;
  if (discovery) discover(tick.wall_time_ms, out);
  if (jobs_refused_ > 0 && !said_refused_) {
    said_refused_ = true;
    notice += std::string(notice.empty() ? "" : "; ") + "more than " +
              std::to_string(options_.max_jobs) +
              " jobs at once: further processes are not tracked (their datagrams are counted, "
              "not attributed)";
  }
  // Who else uses the jobs' devices: the leaf cgroups' io.stat, once per discovery period.
  std::map<std::filesystem::path, std::vector<IoStat>> leaf_io;
  double leaf_elapsed = 0;
  if (discovery && cgroups_.available()) {
    leaf_io = cgroups_.leafIoStats(kMaxCgroupsWalked);
    leaf_elapsed =
        leaf_io_ns_ != 0 ? static_cast<double>(tick.monotonic_ns - leaf_io_ns_) / 1e9 : 0;
  }
  // Attributed now, before exited members are pruned: a process sends its last datagram as
  // it finishes, and it may be gone by this tick.
  const ReportedSteps dataloader = drainDataloader(tick.wall_time_ms, out);
  for (auto& [key, job] : jobs_) {
    followChildren(job, discovery, out);
    assignRanks(job);
  }
  if (discovery) scanOpenFiles();  // the workers just found included
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    Totals total;
    std::map<int32_t, Totals> by_rank;
    // When a parent reaps a child, the kernel adds the child's I/O counters to the parent's
    // (wait_task_zombie), so the parent's next delta holds everything the child ever read.
    // What we had already counted for a child reaped by a member is taken back out, from the
    // job and from the rank of the parent that reaped it.
    std::map<std::optional<int32_t>, ProcIo> reaped;
    for (auto m = job.members.begin(); m != job.members.end();) {
      auto stat = m->second.files->stat();
      if (!stat || stat->start_time_ticks != m->second.stat.start_time_ticks) {
        const Member& gone = m->second;
        if (auto parent = job.members.find(gone.stat.ppid);
            gone.io && parent != job.members.end()) {
          ProcIo& r = reaped[parent->second.rank];
          r.read_bytes += gone.io->read_bytes;
          r.write_bytes += gone.io->write_bytes;
          r.rchar += gone.io->rchar;
          r.syscr += gone.io->syscr;
        }
        m = job.members.erase(m);  // exited (or its pid was reused)
        job.ranks_changed = true;
        continue;
      }
      Member& member = m->second;
      auto parent = job.members.find(stat->ppid);
      const bool rank_main =
          member.rank && (parent == job.members.end() || parent->second.rank != member.rank);
      const double cpu =
          static_cast<double>(forwardDelta(member.stat.utime_ticks + member.stat.stime_ticks,
                                           stat->utime_ticks + stat->stime_ticks)) /
          static_cast<double>(clock_ticks_per_second_);
      auto io = member.files->io();
      const ThreadStates threads = member.files->threadStates(stat->num_threads);
      Totals* const into[] = {&total, member.rank ? &by_rank[*member.rank] : nullptr};
      for (Totals* t : into) {
        if (!t) continue;
        const bool main = t == &total ? member.root : rank_main;
        (main ? t->main_cpu : t->workers_cpu) += cpu;
        if (io && member.io) {
          t->io_known = true;
          t->read_bytes += static_cast<double>(forwardDelta(member.io->read_bytes, io->read_bytes));
          t->write_bytes +=
              static_cast<double>(forwardDelta(member.io->write_bytes, io->write_bytes));
          t->rchar += static_cast<double>(forwardDelta(member.io->rchar, io->rchar));
          t->syscr += static_cast<double>(forwardDelta(member.io->syscr, io->syscr));
        }
        t->d_state += threads.d_state;
        for (const auto& w : threads.wchans) ++t->wchans[w];
        if (main && t == &total && !threads.main_sleep_wchan.empty())
          ++t->sleep_wchans[threads.main_sleep_wchan];
        ++t->processes;
        if (!main) ++t->workers;
      }
      member.stat = *stat;
      member.io = io;
      ++m;
    }
    if (auto reported = dataloader.by_job.find(job.description.key);
        reported != dataloader.by_job.end()) {
      total.reported = reported->second;
      total.any_reported = true;
    }
    auto net = [](double counted, uint64_t taken_back) {
      return std::max(0.0, counted - static_cast<double>(taken_back));
    };
    auto fill = [&](auto& sample, const Totals& t, const ProcIo& taken_back) {
      sample.processes = t.processes;
      sample.workers = t.workers;
      sample.d_state_threads = t.d_state;
      if (have_interval) {
        sample.main_cpu_ratio = perSecond(t.main_cpu, elapsed);
        sample.workers_cpu_ratio = perSecond(t.workers_cpu, elapsed);
        if (t.io_known) {
          sample.read_bytes_per_second =
              perSecond(net(t.read_bytes, taken_back.read_bytes), elapsed);
          sample.write_bytes_per_second =
              perSecond(net(t.write_bytes, taken_back.write_bytes), elapsed);
        }
      }
      if (!t.wchans.empty()) sample.top_wchan = mostCommon(t.wchans);
      if (t.any_reported) {
        sample.steps = t.reported.steps;
        sample.data_wait_seconds = t.reported.wait_seconds;
        sample.step_seconds = t.reported.step_seconds;
      }
    };
    ProcIo all_reaped{};
    for (const auto& [rank, r] : reaped) {
      all_reaped.read_bytes += r.read_bytes;
      all_reaped.write_bytes += r.write_bytes;
      all_reaped.rchar += r.rchar;
      all_reaped.syscr += r.syscr;
    }
    JobSample sample;
    sample.key = job.description.key;
    sample.gpus = job.description.gpus;
    fill(sample, total, all_reaped);
    if (!total.sleep_wchans.empty()) sample.sleep_wchan = mostCommon(total.sleep_wchans);
    if (total.any_reported) sample.samples = total.reported.samples;
    if (have_interval && total.io_known) {
      sample.rchar_per_second = perSecond(net(total.rchar, all_reaped.rchar), elapsed);
      sample.read_syscalls_per_second = perSecond(net(total.syscr, all_reaped.syscr), elapsed);
    }
    const bool any_root = std::any_of(job.members.begin(), job.members.end(),
                                      [](const auto& m) { return m.second.root; });
    if (any_root) readCgroups(job, discovery, have_interval ? elapsed : 0.0, sample);
    if (discovery && any_root) {
      describeDevices(job, out);
      if (!job.devices.empty()) {
        std::vector<DeviceUser> users;
        if (!leaf_io_.empty()) {
          users = deviceUsers(leaf_io_, leaf_io, leaf_elapsed, job.devices, job.cgroups,
                              cgroups_.base(), [&](uint32_t major, uint32_t minor) {
                                const BlockDevice* d =
                                    tree_ ? tree_->findByDevnum(major, minor) : nullptr;
                                return d ? d->name : std::string();
                              });
        }
        addProcessNeighbours(job, sample, out.disks, tick.monotonic_ns, users);
        // Said ('' for none) where something was read: the cgroups, or the processes this tick.
        if (!leaf_io_.empty() || process_io_tick_ == ticks_)
          sample.neighbour_io = encodeDeviceUsers(users);
      }
    }
    if (!any_root) job.description.ended_ms = tick.wall_time_ms;
    if (job.changed || !any_root) {
      out.job_updates.push_back(job.description);
      job.changed = false;
    }
    // A job of one rank is its own rank: no per-rank rows that repeat the job's.
    describeRanks(job, out);
    if (job.ranks.size() >= 2) {
      for (const auto& [rank, description] : job.ranks) {
        RankSample r;
        r.key = job.description.key;
        r.rank = rank;
        r.gpu = description.gpu;
        Totals& t = by_rank[rank];
        if (auto reported = dataloader.by_rank.find({job.description.key, rank});
            reported != dataloader.by_rank.end()) {
          t.reported = reported->second;
          t.any_reported = true;
        }
        auto taken = reaped.find(rank);
        fill(r, t, taken == reaped.end() ? ProcIo{} : taken->second);
        out.ranks.push_back(std::move(r));
      }
    }
    out.jobs.push_back(std::move(sample));  // the last interval of an ending job counts too
    it = any_root ? std::next(it) : jobs_.erase(it);
  }
  if (discovery && cgroups_.available()) {
    leaf_io_ = std::move(leaf_io);
    leaf_io_ns_ = tick.monotonic_ns;
  }
  if (discovery && process_io_tick_ != ticks_) {  // no job needed a walk: the next starts afresh
    process_io_.clear();
    process_io_ns_ = 0;
  }
  // A launcher's entry goes with the launcher, once its job has ended; looked at on discovery
  // ticks, not every tick.
  if (discovery) {
    std::erase_if(launcher_jobs_, [&](const auto& entry) {
      if (jobs_.count(entry.second)) return false;
      const auto stat = reader_.stat(entry.first.first);
      return !stat || stat->start_time_ticks != entry.first.second;
    });
  }
  CollectResult result = jobs_.empty() && out.job_updates.empty()
                             ? CollectResult::noData(socket_ ? std::string() : "no job found yet")
                             : CollectResult::data();
  result.notice = std::move(notice);
  return result;
}

}  // namespace stallwatch::collectors
