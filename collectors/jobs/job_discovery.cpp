// The jobs collector's discovery: which processes make up each job (collectors/jobs/jobs.h says how
// jobs are found and grouped), what names a job, and following each job's children.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "collectors/jobs/jobs.h"
#include "collectors/jobs/kubernetes_pod.h"
#include "common/text.h"

namespace stallwatch::collectors {
namespace {

constexpr int kMaxAncestorDepth = 64;
// Of max_jobs, what ordinary users' dataloader senders cannot take (at most an eighth).
constexpr size_t kReservedJobSlots = 32;
constexpr size_t kMaxCmdlineBytes = 512;
// A job id from a process's environment (SLURM_JOB_ID, TORCHELASTIC_RUN_ID...): what any process
// can set, so bounded (it becomes a label value on /metrics) and made valid UTF-8.
constexpr size_t kMaxIdBytes = 128;

std::string idText(const std::string& value) { return common::boundedUtf8(value, kMaxIdBytes); }

std::string joinCmdline(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (out.size() >= kMaxCmdlineBytes) break;
    out += (out.empty() ? "" : " ") + a;
  }
  return common::boundedUtf8(out, kMaxCmdlineBytes);
}

// A short name for people: "python3 train.py" rather than the whole command line.
std::string labelFromCmdline(const std::vector<std::string>& args, const std::string& comm) {
  constexpr size_t kMaxLabelBytes = 80;
  if (args.empty()) return common::boundedUtf8(comm, kMaxLabelBytes);
  std::string label = std::filesystem::path(args[0]).filename().string();
  for (size_t i = 1; i < args.size() && i < 3; ++i) label += " " + args[i];
  // One line for a table: control characters (a `python -c` script's newlines) become spaces.
  for (char& c : label) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return common::boundedUtf8(label, kMaxLabelBytes);
}

std::string jobLabels(const std::map<std::string, std::string>& env) {
  static const char* kKeys[] = {"SLURM_JOB_ID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID",
                                "RANK",         "LOCAL_RANK",    "WORLD_SIZE"};
  std::string out;
  for (const char* k : kKeys) {
    if (auto it = env.find(k); it != env.end())
      out += (out.empty() ? "" : ",") + std::string(k) + "=" + idText(it->second);
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

bool slurmCgroupConfirms(const std::string& key, const std::optional<std::string>& cgroup_path) {
  constexpr std::string_view kSlurm = "slurm:";
  if (!cgroup_path || key.rfind(kSlurm, 0) != 0) return false;
  const std::string id = key.substr(kSlurm.size(), key.find('.') - kSlurm.size());
  // Slurm's cgroup plugins, v1 and v2: .../job_<id>/step_<step>/...
  const std::string component = "/job_" + id;
  for (size_t at = cgroup_path->find(component); at != std::string::npos;
       at = cgroup_path->find(component, at + 1)) {
    const size_t end = at + component.size();
    if (end == cgroup_path->size() || (*cgroup_path)[end] == '/') return true;
  }
  return false;
}

std::string jobKeyFromEnvironment(const std::map<std::string, std::string>& env) {
  if (auto it = env.find("SLURM_JOB_ID"); it != env.end() && !it->second.empty()) {
    auto step = env.find("SLURM_STEP_ID");
    return "slurm:" + idText(it->second) + (step != env.end() ? "." + idText(step->second) : "");
  }
  if (auto it = env.find("TORCHELASTIC_RUN_ID"); it != env.end() && !it->second.empty()) {
    return "torchelastic:" + idText(it->second);
  }
  // torch.distributed started without torchrun (mp.spawn, a hand-written launcher): the
  // rendezvous address is what the ranks of one run share.
  auto addr = env.find("MASTER_ADDR"), port = env.find("MASTER_PORT");
  if (addr != env.end() && port != env.end() && !addr->second.empty() && !port->second.empty()) {
    return "dist:" + idText(addr->second) + ":" + idText(port->second);
  }
  return {};
}

JobTracker::Job* JobTracker::jobOf(uint32_t pid) {
  for (auto& [key, job] : jobs_) {
    if (job.members.count(pid)) return &job;
  }
  return nullptr;
}

// An agent that is not root cannot read another user's /proc/PID/io, fd or environ (ptrace
// access): the job's reads, the devices its files are on and its workers' I/O go unmeasured.
// Said once per job, naming what and why (issue 43: a non-root agent degraded without a word).
void JobTracker::sayWhatCannotBeRead(Job& job, uint32_t pid, bool io_read) {
  const std::filesystem::path dir = reader_.dir(pid);
  std::vector<std::string> unread;
  if (!io_read) unread.push_back("io");
  if (::access((dir / "fd").c_str(), R_OK | X_OK) != 0 && errno == EACCES) unread.push_back("fd");
  if (::access((dir / "environ").c_str(), R_OK) != 0 && errno == EACCES)
    unread.push_back("environ");
  if (unread.empty()) return;
  job.blindness_said = true;
  struct stat owner {};
  const bool known = ::stat(dir.c_str(), &owner) == 0;
  std::string what;
  for (const auto& u : unread) what += (what.empty() ? "" : ", ") + dir.string() + "/" + u;
  spdlog::warn(
      "job {}: cannot read {} (the process is uid {}'s, the agent runs as uid {}): its reads, the "
      "devices its files are on and its workers' I/O are not measured, and the verdicts that need "
      "them say unknown; run the agent as root (the package's service does) or as the job's user",
      common::printable(job.description.key), what, known ? std::to_string(owner.st_uid) : "?",
      ::geteuid());
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
  if (!job.blindness_said) sayWhatCannotBeRead(job, pid, io.has_value());
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
  auto pod = uid ? podByUid(pod_logs_, *uid) : std::nullopt;
  if (pod) {
    if (const auto id = containerIdFromCgroup(*path))
      pod->container = containerName(container_logs_, *pod, *id);
  }
  return pod;
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
  const std::optional<std::string> claimed_key =
      forced_key.empty() && !key.empty() ? std::optional(key) : std::nullopt;
  // In a Kubernetes pod without a run id of its own: the pod names the job, so that its
  // series keep one label for the pod's life.
  const auto pod = podOf(pid);
  if (key.empty() && pod) key = "k8s:" + idText(pod->ns) + "/" + idText(pod->name);
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
  // Identity: a job id in the environment is what any process can set. An ordinary user's
  // claim to one that nothing confirms (a Slurm job cgroup of that id) carries the user's uid,
  // so that arriving first takes no one's job (issue 46); root's claim and a confirmed one keep
  // the plain key. A process of another user naming a key already held is a job of its own,
  // never merged into it (its steps would count as the job's); the operator's --pid and
  // --cgroup say what they follow.
  struct stat owner {};
  const std::optional<uint32_t> uid =
      ::stat(reader_.dir(pid).c_str(), &owner) == 0 ? std::optional(owner.st_uid) : std::nullopt;
  if (forced_key.empty()) {
    const bool claimed = claimed_key && !key.empty() && key == *claimed_key;
    const auto same = jobs_.find(key);
    const bool unconfirmed =
        claimed && uid && *uid != 0 && !slurmCgroupConfirms(key, cgroups_.pathOf(pid));
    const bool held_by_another =
        same != jobs_.end() && uid && same->second.uid && *same->second.uid != *uid;
    if (unconfirmed || held_by_another) key += "~uid" + std::to_string(*uid);
  }
  // Ordinary users' senders (a datagram is all it takes to be one) leave the last slots to
  // jobs found otherwise (a GPU, --pid, --cgroup) and to root's: a flood of job ids from one
  // user cannot keep a real job untracked (issue 46).
  const bool ordinary_sender = sender && forced_key.empty() && (!uid || *uid != 0);
  const size_t cap = ordinary_sender
                         ? options_.max_jobs - std::min(options_.max_jobs / 8, kReservedJobSlots)
                         : options_.max_jobs;
  if (jobs_.size() >= cap && !jobs_.count(key)) {
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
    job.pod = pod;
    if (pod) {
      job.description.labels += (job.description.labels.empty() ? "" : ",") +
                                std::string("K8S_NAMESPACE=") + pod->ns + ",K8S_POD=" + pod->name;
    }
    job.description.started_ms = now_ms;
    job.uid = uid;
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

}  // namespace stallwatch::collectors
