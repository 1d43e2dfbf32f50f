#include "collectors/jobs/jobs.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "collectors/counter_rates.h"

namespace stallwatch::collectors {
namespace {

// The cgroup tree walked for who else uses the jobs' devices: a bound on a node with thousands.
constexpr size_t kMaxCgroupsWalked = 1024;

// The text counted most often in COUNTS, which is not empty.
std::string mostCommon(const std::map<std::string, uint32_t>& counts) {
  return std::max_element(counts.begin(), counts.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

// COUNTED less what was TAKEN_BACK (a reaped child's share), never below zero.
double netOf(double counted, uint64_t taken_back) {
  return std::max(0.0, counted - static_cast<double>(taken_back));
}

}  // namespace

// Figures summed over a set of processes for one interval.
struct JobTracker::Totals {
  double main_cpu = 0, workers_cpu = 0, read_bytes = 0, write_bytes = 0, rchar = 0, syscr = 0;
  bool io_known = false;
  uint32_t processes = 0, workers = 0, d_state = 0;
  std::map<std::string, uint32_t> wchans;
  std::map<std::string, uint32_t> sleep_wchans;  // the job's main processes' sleeping main threads
  std::map<std::string, uint32_t> workers_sleep_wchans;  // its other processes', likewise
  // The least busy main thread of the main processes (the one a synchronous job waits for)
  // and its share of the interval runnable but waiting for a CPU.
  std::optional<double> main_thread_cpu, main_thread_runqueue;
  // Where the main thread slept (sampled), of the main process that waited most for input.
  std::optional<double> loader_wait, futex_wait;
  bool pin_memory = false;
  uint32_t stopped = 0;  // processes stopped (T, t)
  DataloaderTotals reported;
  bool any_reported = false;
};

// One interval's figures T (less TAKEN_BACK) into a job's or a rank's SAMPLE.
template <typename Sample>
void JobTracker::fillSample(Sample& sample, const Totals& t, const ProcIo& taken_back,
                            const Interval& interval) {
  sample.processes = t.processes;
  sample.workers = t.workers;
  sample.d_state_threads = t.d_state;
  sample.stopped_processes = t.stopped;
  sample.main_thread_cpu_ratio = t.main_thread_cpu;
  sample.main_thread_runqueue_ratio = t.main_thread_runqueue;
  sample.main_thread_loader_wait_ratio = t.loader_wait;
  sample.main_thread_futex_wait_ratio = t.futex_wait;
  sample.pin_memory = t.pin_memory;
  if (interval.have) {
    sample.main_cpu_ratio = perSecond(t.main_cpu, interval.elapsed);
    sample.workers_cpu_ratio = perSecond(t.workers_cpu, interval.elapsed);
    if (t.io_known) {
      sample.read_bytes_per_second =
          perSecond(netOf(t.read_bytes, taken_back.read_bytes), interval.elapsed);
      sample.write_bytes_per_second =
          perSecond(netOf(t.write_bytes, taken_back.write_bytes), interval.elapsed);
    }
  }
  if (!t.wchans.empty()) sample.top_wchan = mostCommon(t.wchans);
  if (t.any_reported) {
    sample.steps = t.reported.steps;
    sample.data_wait_seconds = t.reported.wait_seconds;
    sample.step_seconds = t.reported.step_seconds;
  }
}

JobTracker::JobTracker(const SystemRoot& root, JobTrackerOptions options,
                       std::unique_ptr<GpuDriver> gpu)
    : reader_(root.proc),
      cgroups_(root),
      pod_logs_(root.pod_logs),
      container_logs_(root.container_logs),
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
  if (options_.wait_sample_hz > 0)
    sampler_ = std::make_unique<MainThreadSampler>(root.proc, options_.wait_sample_hz);
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

// When a parent reaps a child, the kernel adds the child's I/O counters to the parent's
// (wait_task_zombie), so the parent's next delta holds everything the child ever read.
// What we had already counted for a child reaped by a member is taken back out, from the
// job and from the rank of the parent that reaped it.
void JobTracker::sumMembers(Job& job, const Interval& interval, Totals& total,
                            std::map<int32_t, Totals>& by_rank,
                            std::map<std::optional<int32_t>, ProcIo>& reaped,
                            std::vector<uint32_t>& main_pids) {
  for (auto m = job.members.begin(); m != job.members.end();) {
    auto stat = m->second.files->stat();
    if (!stat || stat->start_time_ticks != m->second.stat.start_time_ticks) {
      const Member& gone = m->second;
      if (auto parent = job.members.find(gone.stat.ppid); gone.io && parent != job.members.end()) {
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
    // Its main thread's CPU and run-queue wait over the interval, from its schedstat.
    std::optional<double> thread_cpu, thread_runqueue;
    if (interval.have && threads.main_run_ns && member.main_run_ns) {
      thread_cpu = std::min(
          1.0, static_cast<double>(forwardDelta(*member.main_run_ns, *threads.main_run_ns)) /
                   (interval.elapsed * 1e9));
      if (threads.main_wait_ns && member.main_wait_ns) {
        thread_runqueue = std::min(
            1.0, static_cast<double>(forwardDelta(*member.main_wait_ns, *threads.main_wait_ns)) /
                     (interval.elapsed * 1e9));
      }
    }
    member.main_run_ns = threads.main_run_ns;
    member.main_wait_ns = threads.main_wait_ns;
    const bool stopped = stat->state == 'T' || stat->state == 't';
    const WaitCounts* sampled = nullptr;
    if (member.root || rank_main) {
      main_pids.push_back(m->first);
      if (interval.discovery) member.pin_thread = reader_.hasThreadNamed(m->first, "pt_data_pin");
      if (auto w = interval.waits.find(m->first);
          w != interval.waits.end() && w->second.samples > 0)
        sampled = &w->second;
    }
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
      if (!main && !threads.main_sleep_wchan.empty())
        ++t->workers_sleep_wchans[threads.main_sleep_wchan];
      if (main && thread_cpu && (!t->main_thread_cpu || *thread_cpu < *t->main_thread_cpu)) {
        t->main_thread_cpu = thread_cpu;
        t->main_thread_runqueue = thread_runqueue;
      }
      if (main && sampled) {
        const double loader = static_cast<double>(sampled->loader) / sampled->samples;
        if (!t->loader_wait || loader > *t->loader_wait) {
          t->loader_wait = loader;
          t->futex_wait = static_cast<double>(sampled->futex) / sampled->samples;
          t->pin_memory = member.pin_thread;
        }
      }
      t->stopped += stopped ? 1 : 0;
      ++t->processes;
      if (!main) ++t->workers;
    }
    member.stat = *stat;
    member.io = io;
    ++m;
  }
}

// On discovery ticks: the job's devices, and who else used them (the leaf cgroups' io.stat
// read this tick, LEAF_IO over LEAF_ELAPSED seconds, against the last; else the processes).
void JobTracker::describeNeighbours(Job& job, const IoStatWalk& leaf_io, double leaf_elapsed,
                                    const Tick& tick, JobSample& sample, SampleBatch& out) {
  describeDevices(job, out);
  if (!job.devices.empty()) {
    std::vector<DeviceUser> users;
    if (!leaf_io_.leaves.empty()) {
      users = deviceUsers(leaf_io_.leaves, leaf_io.leaves, leaf_elapsed, job.devices, job.cgroups,
                          cgroups_.base(), [&](uint32_t major, uint32_t minor) {
                            const BlockDevice* d =
                                tree_ ? tree_->findByDevnum(major, minor) : nullptr;
                            return d ? d->name : std::string();
                          });
    }
    addProcessNeighbours(job, sample, out.disks, tick.monotonic_ns, users);
    // Said ('' for none) where something was read: the cgroups, or the processes this tick.
    if (!leaf_io_.leaves.empty() || process_io_tick_ == ticks_)
      sample.neighbour_io = encodeDeviceUsers(users);
  }
}

// A job of several ranks: each rank's interval, with the steps it reported and the figures of
// its own cgroup.
void JobTracker::rankSamples(const Job& job, std::map<int32_t, Totals>& by_rank,
                             const std::map<std::optional<int32_t>, ProcIo>& reaped,
                             const ReportedSteps& dataloader, const Interval& interval,
                             SampleBatch& out) {
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
    fillSample(r, t, taken == reaped.end() ? ProcIo{} : taken->second, interval);
    if (auto cg = job.rank_cgroup_figures.find(rank); cg != job.rank_cgroup_figures.end()) {
      r.cgroup_limited_read_bytes_per_second = cg->second.limited_read_bytes_per_second;
      r.cgroup_read_limit_bytes_per_second = cg->second.read_limit_bytes_per_second;
      r.cgroup_cpu_throttled_ratio = cg->second.cpu_throttled_ratio;
      r.cgroup_io_some = cg->second.io_some;
    }
    out.ranks.push_back(std::move(r));
  }
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
  // Who else uses the jobs' devices: the leaf cgroups' io.stat, once per discovery period, and
  // only while a job is followed: a host's tree is hundreds of cgroups, walked for nobody
  // otherwise (issue 47). A job found later is judged from its second walk on, never against a
  // reading from before it (forgotten below).
  const bool walk_leaves = discovery && cgroups_.available() && !jobs_.empty();
  IoStatWalk leaf_io;
  double leaf_elapsed = 0;
  if (walk_leaves) {
    leaf_io = cgroups_.leafIoStats(kMaxCgroupsWalked, &leaf_io_);
    leaf_elapsed =
        leaf_io_ns_ != 0 ? static_cast<double>(tick.monotonic_ns - leaf_io_ns_) / 1e9 : 0;
  }
  // Where the main threads slept over the interval just ended.
  const std::map<uint32_t, WaitCounts> waits =
      sampler_ ? sampler_->take() : std::map<uint32_t, WaitCounts>{};
  const Interval interval{discovery, have_interval, elapsed, waits};
  std::vector<uint32_t> main_pids;  // to sample from now on
  // Attributed now, before exited members are pruned: a process sends its last datagram as
  // it finishes, and it may be gone by this tick. Not at the first reading (the recorder's
  // priming tick, whose interval figures are dropped): what came before it goes with the first
  // interval (a job that started reporting while the agent started lost its first steps).
  const ReportedSteps dataloader =
      have_interval ? drainDataloader(tick.wall_time_ms, out) : ReportedSteps{};
  for (auto& [key, job] : jobs_) {
    followChildren(job, discovery, out);
    assignRanks(job);
  }
  if (discovery) scanOpenFiles();  // the workers just found included
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    Totals total;
    std::map<int32_t, Totals> by_rank;
    std::map<std::optional<int32_t>, ProcIo> reaped;
    sumMembers(job, interval, total, by_rank, reaped, main_pids);
    if (auto reported = dataloader.by_job.find(job.description.key);
        reported != dataloader.by_job.end()) {
      total.reported = reported->second;
      total.any_reported = true;
    }
    ProcIo all_reaped{};
    for (const auto& [rank, r] : reaped) {
      all_reaped.read_bytes += r.read_bytes;
      all_reaped.write_bytes += r.write_bytes;
      all_reaped.rchar += r.rchar;
      all_reaped.syscr += r.syscr;
    }
    JobSample sample;
    sample.key = job.description.key;
    sample.pod = job.pod;
    sample.gpus = job.description.gpus;
    fillSample(sample, total, all_reaped, interval);
    if (!total.sleep_wchans.empty()) sample.sleep_wchan = mostCommon(total.sleep_wchans);
    if (!total.workers_sleep_wchans.empty())
      sample.workers_sleep_wchan = mostCommon(total.workers_sleep_wchans);
    if (total.any_reported) sample.samples = total.reported.samples;
    if (have_interval && total.io_known) {
      sample.rchar_per_second = perSecond(netOf(total.rchar, all_reaped.rchar), elapsed);
      sample.read_syscalls_per_second = perSecond(netOf(total.syscr, all_reaped.syscr), elapsed);
    }
    const bool any_root = std::any_of(job.members.begin(), job.members.end(),
                                      [](const auto& m) { return m.second.root; });
    if (any_root) {
      readCgroups(job, discovery, have_interval ? elapsed : 0.0, sample);
      sample.cgroup_ids.assign(job.cgroup_ids.begin(), job.cgroup_ids.end());
      sample.cgroups_have_io = job.cgroups_have_io;
      sample.cgroups_have_memory = job.cgroups_have_memory;
      sample.memory_cgroup_ids.assign(job.memory_cgroup_ids.begin(), job.memory_cgroup_ids.end());
    }
    if (discovery && any_root) describeNeighbours(job, leaf_io, leaf_elapsed, tick, sample, out);
    if (!any_root) job.description.ended_ms = tick.wall_time_ms;
    if (job.changed || !any_root) {
      out.job_updates.push_back(job.description);
      job.changed = false;
    }
    // A job of one rank is its own rank: no per-rank rows that repeat the job's.
    describeRanks(job, out);
    if (job.ranks.size() >= 2) rankSamples(job, by_rank, reaped, dataloader, interval, out);
    out.jobs.push_back(std::move(sample));  // the last interval of an ending job counts too
    it = any_root ? std::next(it) : jobs_.erase(it);
  }
  if (sampler_) {
    sampler_->follow(main_pids);
    // Full rate while a job is young (its first minutes, a short job), the steady one after.
    const bool young = std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& j) {
      return tick.wall_time_ms - j.second.description.started_ms <
             static_cast<int64_t>(options_.wait_sample_young_s * 1000);
    });
    sampler_->setRate(young ? options_.wait_sample_hz
                            : std::min(options_.wait_sample_hz, options_.wait_sample_steady_hz));
  }
  if (discovery) {
    leaf_io_ = std::move(leaf_io);
    leaf_io_ns_ = walk_leaves ? tick.monotonic_ns : 0;
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
  result.refused = jobs_refused_ - refused_said_;
  refused_said_ = jobs_refused_;
  return result;
}

}  // namespace stallwatch::collectors
