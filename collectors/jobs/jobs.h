// The job tracker: which training jobs run on this host, which processes belong to each
// (main process, ranks, dataloader workers), what they read and how their input pipeline
// fares. Jobs are found
//   - explicitly: --pid PID, --cgroup PATH (a cgroup v2 directory);
//   - automatically: processes holding a GPU compute context (NVML), and processes that
//     send dataloader metrics to the agent's socket;
// and grouped by the job labels in their environment (SLURM_JOB_ID, TORCHELASTIC_RUN_ID),
// so the ranks of one run are one job. Each job's members are its roots and their
// descendants. A job ends when its last root exits.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/devices/block_devices.h"
#include "collectors/gpu/gpu_driver.h"
#include "collectors/jobs/dataloader_socket.h"
#include "collectors/jobs/job_cgroup.h"
#include "collectors/jobs/kubernetes_pod.h"
#include "collectors/jobs/process_neighbours.h"
#include "collectors/jobs/process_watch.h"
#include "collectors/jobs/wait_sampler.h"
#include "collectors/process_reader.h"

namespace stallwatch::collectors {

struct JobTrackerOptions {
  std::vector<uint32_t> pids;
  std::vector<std::filesystem::path> cgroups;
  bool follow_gpu_processes = true;
  bool listen_dataloader = true;
  DataloaderSocket::Options socket;
  // Finding new jobs and scanning open files happen every this many ticks; following
  // children of known members and reading their counters happen every tick.
  uint32_t discovery_every_ticks = 5;
  // Threads that have not run for ten ticks are looked at every this many ticks; the others
  // every tick (collectors/jobs/process_watch.h).
  uint32_t idle_thread_check_every = 5;
  // Where each main process's main thread waits is sampled this many times a second, on a thread
  // of its own (collectors/jobs/wait_sampler.h): a job without the hook's input-wait share. 0: off.
  // Each wake costs ~50 us on a Firecracker GPU host whatever it samples (0.5 ms of CPU a
  // second at 10 Hz, measured beside a real job): the rate holds while a followed job is
  // younger than wait_sample_young_s, and drops to wait_sample_steady_hz after (600 samples
  // in a 5-minute window), where a short job's precision is no longer at stake.
  double wait_sample_hz = 10;
  double wait_sample_steady_hz = 2;
  double wait_sample_young_s = 300;
  size_t max_open_files_per_process = 512;
  // Descriptors looked at per discovery tick, all jobs together: a CUDA rank holds a hundred or
  // more and its forked workers inherit them (2 ranks x 8 workers of a real DDP job held 1 748;
  // 8 x 8 would hold ~15 000, 50 ms of readlink on an H200 host). The members looked at
  // longest ago (never first) go first; each keeps what its last look found.
  size_t open_files_per_discovery = 512;
  // A member whose count of open descriptors is what it was when they were last read is not
  // read again (a worker's two hundred inherited ones were compared with its rank's at every
  // look: most of a discovery tick), unless that read is older than this many ticks. Longer
  // than one round of an 8 x 8 job's reads within the budget (~140 ticks), which is how stale
  // a member's files could already be: shorter, and the rereads alone would fill the budget.
  uint64_t open_files_reread_ticks = 300;
  size_t max_processes_per_job = 1024;
  // Jobs tracked at once: senders past it (a flood of short-lived processes, each a job of
  // its own) are not tracked, and their datagrams are counted, not attributed.
  size_t max_jobs = 256;
  // Only jobs on these GPUs (UUIDs or indexes, --gpu) are found through the GPUs.
  std::vector<std::string> only_gpus;
};

// The environment variables that name a job, in the order they are tried for its key.
std::string jobKeyFromEnvironment(const std::map<std::string, std::string>& env);
// Whether a process in CGROUP_PATH is in the Slurm job that KEY ("slurm:ID[.STEP]") names: its
// cgroup is Slurm's job_ID (what confirms a claim made through SLURM_JOB_ID).
bool slurmCgroupConfirms(const std::string& key, const std::optional<std::string>& cgroup_path);

class JobTracker final : public Collector {
 public:
  // GPU may be null (no GPU following).
  JobTracker(const SystemRoot& root, JobTrackerOptions options, std::unique_ptr<GpuDriver> gpu);
  std::string_view name() const override { return "jobs"; }
  CollectResult collect(const Tick& tick, SampleBatch& out) override;

  // The block device tree used to map open files to devices (the recorder rescans it).
  bool wantsDeviceTree() const override { return true; }
  void setDeviceTree(const std::shared_ptr<const DeviceTree>& tree) override { tree_ = tree; }
  // The dataloader socket's counts.
  std::string finalReport() const override;
  const DataloaderSocket* socket() const { return socket_.get(); }
  const std::string& socketError() const { return socket_error_; }
  size_t activeJobs() const { return jobs_.size(); }

 private:
  struct Member {
    ProcStat stat;
    std::optional<ProcIo> io;
    bool root = false;
    std::optional<int32_t> rank;  // RANK from its environment, inherited, or its GPU's index
    std::unique_ptr<ProcessWatch> files;               // its /proc files, read every tick
    std::map<std::string, uint32_t> files_per_device;  // at its last open-file scan
    uint64_t files_scanned_tick = 0;                   // 0: never
    uint64_t files_read_tick = 0;           // when its descriptors were last read, not only counted
    std::optional<size_t> open_file_count;  // at that read, where the kernel says
    // Its main thread's schedstat at the last tick (ns on a CPU, ns runnable and waiting).
    std::optional<uint64_t> main_run_ns, main_wait_ns;
    bool pin_thread = false;  // a main process with PyTorch's pin_memory thread (pt_data_pin)
  };
  struct Job {
    JobDescription description;
    std::optional<uint32_t> uid;  // its first process's owner: others' processes never join
    std::optional<PodName> pod;   // the Kubernetes pod of its first process
    std::map<uint32_t, Member> members;
    std::set<std::string> gpus;
    std::map<uint32_t, std::pair<std::string, uint64_t>> gpu_of_pid;  // GPU, memory used there
    std::map<int32_t, RankDescription> ranks;                         // as last written
    bool changed = true;                                              // description to be written
    bool blindness_said = false;  // what the agent cannot read of it, logged once (issue 43)
    bool ranks_changed = true;    // members or their ranks changed: describe the ranks again
    // The cgroups of its root processes (refreshed on discovery ticks) and their last reading.
    std::set<std::filesystem::path> cgroups;
    std::set<uint64_t> cgroup_ids;  // theirs (directory inodes): how the block layer tags I/O
    // Whether each of those has the io controller: only then does a bio's cgroup name it.
    bool cgroups_have_io = false;
    // And whether each root process is charged in a memory cgroup of the job's own (its v2
    // cgroup with the memory controller, or on a hybrid host the v1 memory cgroup that mirrors
    // it), with their ids: the pages its processes bring in are charged there.
    bool cgroups_have_memory = false;
    std::set<uint64_t> memory_cgroup_ids;
    // Whether its roots' cgroups were looked up since a root joined: a job in the root cgroup
    // (none of its own) is not looked up again every tick.
    bool cgroups_looked_up = false;
    std::map<std::filesystem::path, CgroupReading> cgroup_readings;
    // The cgroups above those (how many levels above the nearest of the job's), their limits
    // as last looked at (discovery ticks; io.max every tick); those that set one are read for
    // their io.stat and cpu.stat every tick.
    std::map<std::filesystem::path, int> ancestors;
    std::map<std::filesystem::path, CgroupReading> ancestor_limits;
    // Each root's cgroup (a rank's, where ranks have their own), and each rank's figures this
    // tick from its cgroup and those above it.
    std::map<uint32_t, std::filesystem::path> cgroup_of_root;
    std::map<int32_t, CgroupFigures> rank_cgroup_figures;
    // The CPUs its main process may run on (affinity), looked at on discovery ticks.
    std::optional<uint32_t> cpus_affinity;
    // The devices its files are on and those below them, from the last scan of its open files.
    std::set<Devnum> devices;
  };
  // What this agent cannot read of a new member's /proc files, logged once per job.
  void sayWhatCannotBeRead(Job& job, uint32_t pid, bool io_read);
  struct Totals;  // one rank's (or the job's) figures for an interval
  // What every job's figures this tick are taken over.
  struct Interval {
    bool discovery = false;                       // a discovery tick
    bool have = false;                            // a previous tick to take rates against
    double elapsed = 0;                           // seconds since it
    const std::map<uint32_t, WaitCounts>& waits;  // the main threads' sampled waits
  };
  // The job's members' figures this interval into TOTAL (and BY_RANK); members gone since
  // are pruned, and what they had counted that their reaping parent now holds goes into REAPED
  // (by the parent's rank). The main processes' pids are added to MAIN_PIDS.
  void sumMembers(Job& job, const Interval& interval, Totals& total,
                  std::map<int32_t, Totals>& by_rank,
                  std::map<std::optional<int32_t>, ProcIo>& reaped,
                  std::vector<uint32_t>& main_pids);
  template <typename Sample>
  static void fillSample(Sample& sample, const Totals& t, const ProcIo& taken_back,
                         const Interval& interval);

  // Per job, and per (job, rank) of the sending process.
  struct ReportedSteps {
    std::map<std::string, DataloaderTotals> by_job;
    std::map<std::pair<std::string, int32_t>, DataloaderTotals> by_rank;
  };
  ReportedSteps drainDataloader(int64_t now_ms, SampleBatch& out);
  // A job of several ranks: each rank's interval (into OUT).
  void rankSamples(const Job& job, std::map<int32_t, Totals>& by_rank,
                   const std::map<std::optional<int32_t>, ProcIo>& reaped,
                   const ReportedSteps& dataloader, const Interval& interval, SampleBatch& out);
  // On discovery ticks: JOB's devices, and who else used them, into SAMPLE and OUT.
  void describeNeighbours(Job& job, const IoStatWalk& leaf_io, double leaf_elapsed,
                          const Tick& tick, JobSample& sample, SampleBatch& out);
  void assignRanks(Job& job);
  void describeRanks(Job& job, SampleBatch& out);

  Job* jobOf(uint32_t pid);
  // A dataloader SENDER with no job label joins the live job of a sibling sender (see
  // launcherOf); other processes make a job of their own.
  Job* attach(uint32_t pid, const std::string& forced_key, int64_t now_ms, SampleBatch& out,
              bool sender = false);
  // A process, as (pid, start time): the pair that names it across pid reuse.
  using ProcessId = std::pair<uint32_t, uint64_t>;
  // The process that forked STAT's process, where that parent launches one job's processes;
  // none where it launches unrelated work (init, a service manager, a session leader such as
  // an interactive shell, tmux or sshd).
  std::optional<ProcessId> launcherOf(const ProcStat& stat);
  // The Kubernetes pod PID runs in, when its cgroup is a pod's and the kubelet's log
  // directory names it.
  std::optional<PodName> podOf(uint32_t pid) const;
  void addMember(Job& job, uint32_t pid, bool root, SampleBatch& out);
  void discover(int64_t now_ms, SampleBatch& out);
  // Every tick, the children of the roots' main threads; with ALL_THREADS (discovery ticks),
  // those of every member's threads that ran.
  void followChildren(Job& job, bool all_threads, SampleBatch& out);
  // On discovery ticks, within open_files_per_discovery descriptors for all jobs.
  void scanOpenFiles();
  // The devices (by name) that FILES, paths in a process's mount namespace MOUNTS, are on.
  void countFilesByDevice(const std::vector<std::string>& files,
                          const std::vector<MountInfo>& mounts,
                          std::map<std::string, uint32_t>& files_per_device) const;
  // Other processes' use of JOB's devices (process_neighbours.h), added to USERS (the cgroups
  // found), where the job's devices moved bytes this tick that neither the job (SAMPLE) nor
  // USERS account for. DISKS: this tick's device rates.
  void addProcessNeighbours(const Job& job, const JobSample& sample,
                            const std::vector<DiskSample>& disks, int64_t monotonic_ns,
                            std::vector<DeviceUser>& users);
  void describeDevices(Job& job, SampleBatch& out);
  // The ids of its cgroups and memory cgroups, and their io and memory controllers.
  void identifyCgroups(Job& job);
  // Reads the job's cgroups: this interval's figures into SAMPLE, their limits into the job's
  // description (marked changed when they change).
  void readCgroups(Job& job, bool discovery, double elapsed, JobSample& sample);

  ProcessReader reader_;
  CgroupReader cgroups_;
  std::unique_ptr<MainThreadSampler> sampler_;
  std::filesystem::path pod_logs_;        // the kubelet's pod log directories (SystemRoot)
  std::filesystem::path container_logs_;  // and its links to the containers' logs
  JobTrackerOptions options_;
  std::unique_ptr<GpuDriver> gpu_;
  std::vector<GpuInfo> gpu_list_;
  std::unique_ptr<DataloaderSocket> socket_;
  std::string socket_error_;
  std::shared_ptr<const DeviceTree> tree_;
  std::map<std::string, Job> jobs_;
  // The leaf cgroups' io.stat at the last discovery tick, and when: who else uses the jobs'
  // devices is read every discovery period, not every tick (a walk of the cgroup tree).
  IoStatWalk leaf_io_;
  int64_t leaf_io_ns_ = 0;
  // The last walk of every process's io (those that moved bytes), for the rates of the next;
  // dropped at a discovery tick that needs none, so that a walk is compared with the one a
  // discovery period before it.
  std::map<uint32_t, ProcessIoReading> process_io_;
  int64_t process_io_ns_ = 0;
  uint64_t process_io_tick_ = 0;             // ticks_ at that walk
  std::vector<CommandIo> busiest_commands_;  // this tick's, from the walk
  uint32_t self_pid_ = 0;                    // the agent: never a neighbour
  // Launcher -> the key of the job its senders make, kept while the launcher lives.
  std::map<ProcessId, std::string> launcher_jobs_;
  uint64_t jobs_refused_ = 0;  // processes not tracked: max_jobs reached
  uint64_t refused_said_ = 0;  // of them, counted in a CollectResult already
  bool said_refused_ = false;
  uint64_t ticks_ = 0;
  int64_t last_tick_ns_ = 0;
  const long clock_ticks_per_second_;
};

}  // namespace stallwatch::collectors
