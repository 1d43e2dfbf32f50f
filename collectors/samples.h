// What the collectors emit once per interval and the storage writes: one SampleBatch per tick.
// Rates and shares are per interval; a value that cannot exist for the interval (an await
// with no I/O, a GPU that gave no reading) is std::nullopt and lands in the DB as NULL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stallwatch::collectors {

// iostat -x's per-device figures for one interval (sysstat's definitions).
struct DiskRates {
  double reads_per_second = 0;
  double writes_per_second = 0;
  double read_bytes_per_second = 0;
  double write_bytes_per_second = 0;
  std::optional<double> r_await_ms;  // Δ ms reading / Δ reads completed; none without reads
  std::optional<double> w_await_ms;
  std::optional<double> discards_per_second;  // kernels 4.18+
  std::optional<double> d_await_ms;
  std::optional<double> flushes_per_second;  // kernels 5.5+
  std::optional<double> f_await_ms;
  double aqu_sz = 0;        // Δ weighted ms / Δ ms elapsed
  double util_percent = 0;  // Δ io_ticks / Δ ms elapsed; not meaningful for parallel devices
};

// A device's cumulative counters as /proc/diskstats gives them, for Prometheus' rate() over
// any window (the rates above are the last interval's only). Not stored: the DB keeps rates.
struct DiskTotals {
  uint64_t reads = 0, read_bytes = 0, read_time_ms = 0;
  uint64_t writes = 0, written_bytes = 0, write_time_ms = 0;
  uint64_t io_time_ms = 0, weighted_io_time_ms = 0;
};

// What an NFS mount adds to its iostat-like figures (nfsiostat's arithmetic, per interval).
struct NfsRates {
  std::optional<double> read_rtt_ms;   // Δ rtt / Δ ops of READ: the network and server part
  std::optional<double> write_rtt_ms;  // of the wait (r_await_ms is the whole: execute time)
  double metadata_ops_per_second = 0;  // every op but READ, WRITE, COMMIT and NULL
  std::optional<double> metadata_await_ms;
  double retransmissions_per_second = 0;  // Δ (transmissions - ops), all ops
  double timeouts_per_second = 0;         // major timeouts, all ops
};

// One storage target's figures for an interval: a block device (named as the kernel names
// it), or a mount that no block device serves (named by its mount point): an NFS mount
// (r/w await = READ/WRITE execute time per op, aqu_sz = RPCs outstanding on average, by
// Little's law from the execute time) or a FUSE mount (aqu_sz and in_flight = requests
// waiting for the daemon at the tick; its rates are not known and stay 0).
struct DiskSample {
  std::string device;
  uint32_t major = 0;
  uint32_t minor = 0;
  DiskRates rates;
  uint64_t in_flight = 0;            // requests in flight at the end of the interval
  std::optional<DiskTotals> totals;  // live sampling only (a replay has rates alone)
  std::optional<NfsRates> nfs;       // NFS mounts only
};

// The host's CPUs over an interval (/proc/stat): how many cores' worth of time was busy, and
// how many CPUs are online. What a job's input pipeline could still use is the difference.
struct CpuSample {
  double busy_cores = 0;  // user, nice, system, irq, softirq and steal time, in cores
  // Idle with I/O outstanding, in cores; none where the busy time came from cpu.stat (the I/O
  // wait is only in /proc/stat, read there every tenth interval).
  std::optional<double> iowait_cores;
  uint32_t online_cpus = 0;
};

struct PressureSample {
  std::string resource;              // "io", "cpu", "memory"
  std::optional<double> some_ratio;  // share of the interval in which some task stalled
  std::optional<double> full_ratio;  // share in which all non-idle tasks stalled
  // PSI's cumulative total= (µs), for rate() over any window; live sampling only.
  std::optional<uint64_t> some_total_us, full_total_us;
};

// A GPU as the driver names it, described once.
struct GpuInfo {
  uint32_t index = 0;
  std::string uuid;
  std::string name;
  std::optional<uint64_t>
      memory_total_bytes;  // filled in by the collector when it describes the GPU
};

struct GpuSample {
  uint32_t gpu_index = 0;
  std::string uuid;
  std::optional<double> utilization_percent;  // mean of the driver's samples in the interval
  uint32_t utilization_sample_count = 0;
  std::optional<double> memory_utilization_percent;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint32_t> sm_clock_mhz;
  std::optional<double> power_watts;
  // GPM (Hopper and later): what the SMs did, which tells real work from a collective that
  // spins while it waits for another rank (see GpuActivity).
  std::optional<double> sm_active_percent;
  std::optional<double> sm_occupancy_percent;
  std::optional<double> tensor_active_percent;
  std::optional<double> dram_active_percent;
  std::optional<uint64_t> pcie_tx_bytes_per_second;
  std::optional<uint64_t> pcie_rx_bytes_per_second;
};

struct GpuProcessSample {
  uint32_t gpu_index = 0;
  std::string uuid;
  uint32_t pid = 0;
  std::optional<double> sm_utilization_percent;
  std::optional<double> memory_utilization_percent;
};

// A training job: the processes of one run (main process, dataloader workers, ranks).
struct JobDescription {
  std::string key;    // stable identity: slurm:ID, torchelastic:ID, cgroup:PATH, pid:PID:START
  std::string label;  // for people: the command line, shortened
  uint32_t root_pid = 0;
  std::string cmdline;
  std::string labels;             // SLURM_JOB_ID=..,RANK=.. as found in the environment
  std::vector<std::string> gpus;  // UUIDs of the GPUs the job's processes hold
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  // The limits on the job's own cgroup(s), for people: "io.max 254:0 (vda) rbps=4.0 MiB/s in
  // /sys/fs/cgroup/job; cpu.max 50000 100000 (0.50 CPU) in ..."; "" when none is set.
  std::string cgroup_limits;
};

// The Kubernetes pod a job runs in (collectors/jobs/kubernetes_pod.h): on /metrics as the labels
// namespace, pod and container, which dcgm-exporter and kube-state-metrics use.
struct PodName {
  std::string ns, name;
  std::string container;  // the job's main process's container; "" where the kubelet names none
};

struct JobSample {
  std::string key;
  std::optional<PodName> pod;  // not stored: the key and the labels hold it
  // The ids of the job's cgroups (their directories' inodes, as bio->bi_blkg names them): the
  // per-I/O latency collector tells the job's I/O from others' by them. Not stored.
  std::vector<uint64_t> cgroup_ids;
  // Whether each of those cgroups has the io controller (v2; not on a hybrid host, whose io is
  // v1's blkio): only then does a request's bio name the job's cgroup. Not stored.
  bool cgroups_have_io = false;
  // Whether the job's processes are charged in memory cgroups of its own (its cgroups with the
  // memory controller, or on a hybrid host the v1 memory cgroups that mirror them), and their
  // ids: the pages its processes bring in or allocate are charged there, so a request's first
  // page names the job (the per-I/O collector's pages mode). Not stored.
  bool cgroups_have_memory = false;
  std::vector<uint64_t> memory_cgroup_ids;
  uint32_t processes = 0;
  uint32_t workers = 0;                         // processes other than the job's root(s)
  std::optional<double> read_bytes_per_second;  // block-layer reads (/proc/<pid>/io read_bytes)
  std::optional<double> write_bytes_per_second;
  std::optional<double> rchar_per_second;  // read-syscall bytes, page-cache hits included
  std::optional<double> read_syscalls_per_second;
  std::optional<double> main_cpu_ratio;     // CPU of the root process(es), 1.0 = one core
  std::optional<double> workers_cpu_ratio;  // summed over the other processes
  uint32_t d_state_threads = 0;             // threads in uninterruptible sleep at the tick
  std::string top_wchan;                    // where most of those threads wait
  // Where the main process's main thread sleeps (S), once asleep for two ticks: where an idle
  // job waits (several ranks: the most common). "" while it runs.
  std::string sleep_wchan;
  // The main thread of the job's main process (several: the least busy of them, the one a
  // synchronous job waits for): its CPU (1.0 = one core) and the share of the interval it sat
  // runnable waiting for a CPU, from its schedstat. A training loop that waits for batches
  // sleeps here; one that is CPU-bound itself (or spins on the GPU) runs.
  std::optional<double> main_thread_cpu_ratio;
  std::optional<double> main_thread_runqueue_ratio;
  // Where that thread slept, sampled several times a second (collectors/jobs/wait_sampler.h): the
  // share of samples in the DataLoader's result queue (poll on the workers' pipes, receiving a
  // batch), and in a futex (CUDA's synchronisation, or a pinned batch's queue with pin_memory,
  // whose thread PIN_MEMORY says runs). Several ranks: the rank that waited most for input.
  std::optional<double> main_thread_loader_wait_ratio, main_thread_futex_wait_ratio;
  bool pin_memory = false;
  uint32_t stopped_processes = 0;  // the job's processes stopped (T, t) at the tick
  // Where the job's workers sleep (S) once asleep for two ticks: the most common among them
  // ("" while they run): what a worker that waits on something other than I/O waits on.
  std::string workers_sleep_wchan;
  // How many CPUs the job may use: its main process's affinity, within the CPU quota of its
  // cgroup and those above it; none where it cannot be read.
  std::optional<double> cpus_allowed;
  // From the dataloader socket, where the job reports.
  std::optional<uint64_t> steps;
  std::optional<uint64_t> samples;
  std::optional<double> data_wait_seconds;
  std::optional<double> step_seconds;
  std::vector<std::string> gpus;           // the job's GPU UUIDs (for the recorder's mean below)
  std::optional<double> gpu_util_percent;  // mean utilisation of the job's GPUs this tick
  std::optional<double> gpu_work_percent;  // mean GPM work of the job's GPUs (gpuWorkPercent)
  // The job's own cgroup (v2), where it has one (job_cgroup.h): its pressure shares (the
  // highest over its cgroups), the share of the interval its CPU quota throttled it, and the
  // reads of the cgroup nearest its io.max limit on the limited device, with that limit.
  std::optional<double> cgroup_io_some, cgroup_cpu_some, cgroup_memory_some;
  std::optional<double> cgroup_cpu_throttled_ratio;
  std::optional<double> cgroup_limited_read_bytes_per_second;
  std::optional<double> cgroup_read_limit_bytes_per_second;
  std::string cgroup_limits;  // the limits in force at this tick (JobDescription's wording)
  // The io.max limit nearest its use this tick, said as cgroup_limits says it, with the cgroup
  // that sets it: the job's own, or one above it ("" when no read limit applies).
  std::string cgroup_read_limit;
  // Who else read or wrote the job's devices (other leaf cgroups, heaviest first), as
  // encodeDeviceUsers writes it ("" for none); read on discovery ticks only, none on others.
  std::optional<std::string> neighbour_io;
};

// One rank of a job that runs several (a synchronous data-parallel run: one process per
// GPU, each with its own dataloader workers). RANK comes from the process's environment
// (torchrun, Slurm, DeepSpeed set it); without it, the index of the GPU the process computes
// on. Workers inherit their rank's environment, so each process belongs to one rank.
struct RankDescription {
  std::string key;  // the job
  int32_t rank = 0;
  uint32_t pid = 0;  // the rank's main process (the topmost process of the job with that rank)
  std::string gpu;   // UUID of the GPU it computes on; empty until seen
};

// Per rank per interval: the JobSample figures of that rank's processes, and its GPU's.
struct RankSample {
  std::string key;
  int32_t rank = 0;
  uint32_t processes = 0;
  uint32_t workers = 0;
  std::optional<double> read_bytes_per_second;
  std::optional<double> write_bytes_per_second;
  std::optional<double> main_cpu_ratio;
  std::optional<double> workers_cpu_ratio;
  uint32_t d_state_threads = 0;
  std::string top_wchan;
  std::optional<double> main_thread_cpu_ratio;  // the rank's main process's main thread
  std::optional<double> main_thread_runqueue_ratio;
  std::optional<double> main_thread_loader_wait_ratio, main_thread_futex_wait_ratio;
  bool pin_memory = false;
  uint32_t stopped_processes = 0;
  // Its main process's cgroup (and those above it), where the ranks have cgroups of their own:
  // reads against the nearest io.max, that limit, and the share its CPU quota throttled it.
  std::optional<double> cgroup_limited_read_bytes_per_second;
  std::optional<double> cgroup_read_limit_bytes_per_second;
  std::optional<double> cgroup_cpu_throttled_ratio;
  std::optional<double> cgroup_io_some;
  std::optional<uint64_t> steps;
  std::optional<double> data_wait_seconds;
  std::optional<double> step_seconds;
  std::string gpu;  // for the recorder to attach the GPU's readings below
  std::optional<double> gpu_util_percent;
  std::optional<double> gpu_work_percent;  // GPM work of its GPU (gpuWorkPercent)
};

// "This job reads from DEVICE": a file the job had open lives on it (VIA: the device the
// file was on, when DEVICE is a device underneath it, e.g. the disk under a loop device).
struct JobDeviceFact {
  std::string key;
  std::string device;
  uint32_t major = 0;
  uint32_t minor = 0;
  std::string via;
  uint32_t open_files = 0;
};

struct JobProcessFact {
  std::string key;
  uint32_t pid = 0;
  std::string role;  // main, worker
  std::string comm;
};

// One tick: interval figures (rates and shares over the interval just ended) and facts
// (descriptions of what was found, true whenever they were seen).
// Per-I/O latency over one interval (collectors/io_latency/io_latency.h, eBPF): one device, one
// operation, and whose I/O it was: a followed job's (its key) or everyone else's ("").
struct IoLatencySample {
  std::string device;  // as the device tree names it; "major:minor" when it does not
  uint32_t major = 0, minor = 0;
  std::string op;       // read, write, flush, discard, other
  std::string job_key;  // "" for the I/O of every cgroup that is not a followed job's
  uint64_t count = 0;
  double mean_ms = 0;          // allocation (or issue) to completion
  double service_mean_ms = 0;  // issue to completion
  std::optional<double> p50_ms, p99_ms, p999_ms;
  std::string slots;  // encodeIoLatencySlots: the histogram itself
};

struct SampleBatch {
  int64_t wall_time_ms = 0;     // end of the interval, Unix epoch milliseconds
  double interval_seconds = 0;  // measured on the monotonic clock
  // Interval figures.
  std::vector<DiskSample> disks;
  std::vector<PressureSample> pressure;
  std::optional<CpuSample> cpu;
  std::vector<GpuSample> gpus;
  std::vector<GpuProcessSample> gpu_processes;
  std::vector<JobSample> jobs;
  std::vector<RankSample> ranks;  // jobs of two or more ranks only
  std::vector<IoLatencySample> io_latency;
  // Facts.
  std::vector<GpuInfo> gpu_updates;         // GPUs described: with their first samples
  std::vector<JobDescription> job_updates;  // jobs that started, changed or ended
  std::vector<JobDeviceFact> job_devices;
  std::vector<JobProcessFact> job_processes;
  std::vector<RankDescription> rank_updates;  // ranks that appeared or changed

  // The first reading of a recording only primes the collectors' counters: its figures cover
  // no interval and are dropped, while its facts (jobs found at start) stand on their own.
  void dropIntervalFigures() {
    disks.clear();
    pressure.clear();
    cpu.reset();
    gpus.clear();
    gpu_processes.clear();
    jobs.clear();
    ranks.clear();
    io_latency.clear();
  }
  bool hasFacts() const {
    return !gpu_updates.empty() || !job_updates.empty() || !job_devices.empty() ||
           !job_processes.empty() || !rank_updates.empty();
  }
};

// What a GPU did that moves training forward, from GPM: the busier of its tensor cores and its
// DRAM bandwidth, in percent. A collective that waits for another rank spins on a few SMs
// and reads near 100 % utilisation, but moves no data and runs no tensor op: 0 here. None
// without GPM readings.
std::optional<double> gpuWorkPercent(const GpuSample& gpu);

// Each job's and rank's GPU readings for the tick: the mean utilisation and GPM work of its
// GPUs, from the GPU samples of the same batch.
void attachJobGpuUtilization(SampleBatch& batch);

}  // namespace stallwatch::collectors
