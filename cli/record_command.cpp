#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "agent/recorder.h"
#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/live_options.h"
#include "cli/logging.h"
#include "cli/root_options.h"
#include "collectors/jobs/job_cgroup.h"
#include "common/service_manager.h"
#include "health/smartctl_reader.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

// "recording: 2 jobs, 1 incident open, 3600 intervals written (0 dropped)", for a terminal's
// status line and `systemctl status`.
std::string progressText(const agent::RecorderProgress& p) {
  const auto plural = [](uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string text = "recording: " + plural(p.jobs, "job", "jobs") + ", " +
                     plural(p.incidents_open, "incident open", "incidents open") + ", " +
                     plural(p.written_batches, "interval written", "intervals written");
  text += " (" + std::to_string(p.dropped_batches) + " dropped";
  if (p.late_ticks) text += ", " + plural(p.late_ticks, "late tick", "late ticks");
  return text + ")";
}

struct RecordArgs {
  std::string db;
  bool quiet = false;
  std::string interval = "1s";
  std::string duration;
  std::string flush_interval = "5s";
  std::string stop_timeout = "5s";
  RootOptions root;
  std::map<std::string, bool> collectors;
  size_t queue_capacity = 600;
  std::string nvml_library = "libnvidia-ml.so.1";
  bool nvml_keep_zero_pages = false;
  double wait_sample_hz = 10;
  bool gpu_pcie = false;
  bool gpu_processes = true;
  uint32_t gpu_process_every = 60;
  std::string gpu_utilization = "auto";
  std::vector<uint32_t> pids;
  std::vector<std::string> cgroups;
  std::vector<std::string> gpus;
  std::string socket;
  std::string socket_mode = "0660";
  std::string socket_group;
  std::string db_group;
  LiveArgs live;
  std::string health_interval = "10m";
  std::string retain = "14d";
  std::string health_timeout = "10s";
  std::string smartctl;
  CLI::Option* smartctl_option = nullptr;
};

// The dataloader socket's mode and group; false (said on stderr) when they do not parse.
// A group by name or number, as chgrp takes it; none (said, for OPTION) where there is no such.
std::optional<gid_t> groupNamed(const char* option, const std::string& name) {
  std::vector<char> buffer(16384);
  group grp{};
  group* found = nullptr;
  ::getgrnam_r(name.c_str(), &grp, buffer.data(), buffer.size(), &found);
  if (found) return found->gr_gid;
  if (name.find_first_not_of("0123456789") == std::string::npos && name.size() < 10)
    return static_cast<gid_t>(std::stoul(name));
  std::cerr << "stallwatch record: " << option << " '" << name
            << "' is not a group of this host (getent group " << name << ")\n";
  return std::nullopt;
}

bool toSocketOptions(const RecordArgs& args, collectors::DataloaderSocket::Options& socket) {
  try {
    size_t used = 0;
    const unsigned long mode = std::stoul(args.socket_mode, &used, 8);
    if (used != args.socket_mode.size() || mode > 0777) throw std::invalid_argument("mode");
    socket.mode = static_cast<mode_t>(mode);
  } catch (const std::exception&) {
    std::cerr << "stallwatch record: --socket-mode '" << args.socket_mode
              << "' is not an octal file mode (examples: 0660, 0666)\n";
    return false;
  }
  if (!args.socket_group.empty()) {
    socket.group = groupNamed("--socket-group", args.socket_group);
    if (!socket.group) return false;
  }
  return true;
}

// Drive health: how often, with what time limit, and through smartctl if asked; false (said
// on stderr) when the durations do not parse.
bool toHealthOptions(const RecordArgs& args, agent::RecorderOptions& options) {
  const auto every = parseDuration(args.health_interval);
  const auto timeout = parseDuration(args.health_timeout);
  if (!every || !timeout || timeout->count() <= 0) {
    std::cerr
        << "stallwatch record: --health-interval and --health-timeout take durations (10m, 10s; "
           "--health-interval 0s turns drive health off)\n";
    return false;
  }
  if (every->count() == 0) {
    options.health.reset();
  } else {
    options.health =
        agent::HealthConfig{std::chrono::duration_cast<std::chrono::milliseconds>(*every),
                            std::chrono::duration_cast<std::chrono::milliseconds>(*timeout)};
  }
  if (args.smartctl_option->count() > 0) {
    // smartctl gets a little less than the health read's timeout, so that it is killed,
    // not abandoned.
    const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout) * 9 / 10;
    options.drive_reader = std::make_shared<health::SmartctlFallbackReader>(
        std::make_shared<health::NativeDriveReader>(),
        args.smartctl.empty() ? "smartctl" : args.smartctl, limit);
  }
  return true;
}

// The jobs collector keeps its processes' and their threads' /proc files open from tick to tick
// (collectors/jobs/process_watch.h: a job of 8 ranks x 8 workers holds about 2 000), within half
// the soft limit: the soft limit goes up to the hard one, at most 65 536.
void raiseOpenFileLimit() {
  constexpr rlim_t kEnough = 65536;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= kEnough) return;
  limit.rlim_cur = std::min(limit.rlim_max, kEnough);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// The durations: the interval, the run's, the flushes', the stop's and the history's.
// False after saying which is wrong.
bool toTimings(const RecordArgs& args, agent::RecorderOptions& options) {
  auto interval = parseDuration(args.interval);
  if (!interval || interval->count() < 10'000'000) {
    std::cerr << "stallwatch record: --interval '" << args.interval
              << "' is not a duration of at least 10ms (examples: 500ms, 1s, 5s)\n";
    return false;
  }
  options.interval = *interval;
  if (!args.duration.empty()) {
    auto duration = parseDuration(args.duration);
    if (!duration || *duration < *interval) {
      std::cerr << "stallwatch record: --duration '" << args.duration
                << "' is not a duration of at least one interval (examples: 10s, 30m, 2h)\n";
      return false;
    }
    options.duration = *duration;
  }
  auto flush = parseDuration(args.flush_interval);
  if (!flush) {
    std::cerr << "stallwatch record: --flush-interval '" << args.flush_interval
              << "' is not a duration (examples: 0s, 1s, 5s)\n";
    return false;
  }
  options.flush_interval = std::chrono::duration_cast<std::chrono::milliseconds>(*flush);
  auto stop_timeout = parseDuration(args.stop_timeout);
  if (!stop_timeout) {
    std::cerr << "stallwatch record: --stop-timeout '" << args.stop_timeout
              << "' is not a duration (examples: 5s, 1m)\n";
    return false;
  }
  options.stop_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*stop_timeout);
  // A duration that deletes history needs its unit: a bare 14 (meant as days) read as seconds
  // pruned everything at start. 0 alone keeps everything, whatever the unit.
  if (!args.retain.empty() && args.retain != "0" &&
      args.retain.find_first_not_of("0123456789.") == std::string::npos) {
    std::cerr << "stallwatch record: --retain '" << args.retain
              << "' needs a unit: it deletes older history (examples: 14d, 36h; 0 keeps "
                 "everything)\n";
    return false;
  }
  if (auto retain = parseDuration(args.retain)) {
    options.retain = std::chrono::duration_cast<std::chrono::milliseconds>(*retain);
  } else {
    std::cerr << "stallwatch record: --retain '" << args.retain
              << "' is not a duration (examples: 14d, 36h; 0s keeps everything)\n";
    return false;
  }
  return true;
}

// What the run did, for the log: its intervals, each collector's cost, the drives' reads.
void logSummary(const agent::RecorderSummary& summary, const std::filesystem::path& db_path) {
  spdlog::info(
      "recorded {} intervals to {}: {} written, {} dropped, {} late ticks, {} taken "
      "by a scrape of /metrics",
      summary.intervals, db_path.string(), summary.written_batches, summary.dropped_batches,
      summary.late_ticks, summary.ticks_by_scrape);
  for (const auto& c : summary.collectors) {
    const uint64_t runs = c.data + c.no_data + c.errors;
    spdlog::info(
        "collector {}: {} with data, {} without, {} errors, {} values skipped, "
        "{:.1f} us per collection, {:.1f} us of it CPU (read at {} of them)",
        c.name, c.data, c.no_data, c.errors, c.skipped,
        runs ? static_cast<double>(c.total_time.count()) / 1e3 / static_cast<double>(runs) : 0.0,
        c.cpu_collections ? static_cast<double>(c.total_cpu_time.count()) / 1e3 /
                                static_cast<double>(c.cpu_collections)
                          : 0.0,
        c.cpu_collections);
  }
  if (summary.health) {
    spdlog::info("health: {} drive reads, {} failed, {} timed out, {} skipped while a read hung",
                 summary.health->reads, summary.health->errors, summary.health->timeouts,
                 summary.health->skipped_hung);
  }
}

int runRecord(const RecordArgs& args) {
  std::optional<gid_t> db_group;
  if (!args.db_group.empty() && !(db_group = groupNamed("--db-group", args.db_group))) return 2;
  raiseOpenFileLimit();
  agent::RecorderOptions options;
  options.db_path =
      args.db.empty() ? storage::defaultDatabasePath() : std::filesystem::path(args.db);
  options.db_group = db_group;
  // The default location is made where missing; a path given is taken as given: a typo in it
  // would otherwise make folders anywhere (/nonexistent-dir at the root, as root).
  if (const auto parent = options.db_path.parent_path(); !args.db.empty() && !parent.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      std::cerr << "stallwatch record: --db " << args.db << ": the folder " << parent.string()
                << " does not exist (create it first; only the default location is created)\n";
      return 2;
    }
  }
  options.collector_config.root = toSystemRoot(args.root);
  options.collector_config.nvml_library = args.nvml_library;
  options.collector_config.nvml.release_zero_pages = !args.nvml_keep_zero_pages;
  options.collector_config.gpu.pcie = args.gpu_pcie;
  options.collector_config.gpu.per_process = args.gpu_processes;
  options.collector_config.gpu.process_every_ticks = args.gpu_process_every;
  using Utilization = collectors::GpuCollectorOptions::Utilization;
  options.collector_config.gpu.utilization = args.gpu_utilization == "samples"
                                                 ? Utilization::kSamples
                                             : args.gpu_utilization == "rates" ? Utilization::kRates
                                                                               : Utilization::kAuto;
  options.queue_capacity = args.queue_capacity;
  auto& jobs = options.collector_config.jobs;
  jobs.pids = args.pids;
  // What the flags name must exist, and be what they say, or nothing is followed.
  for (uint32_t pid : args.pids) {
    if (!std::filesystem::exists(options.collector_config.root.proc / std::to_string(pid))) {
      std::cerr << "stallwatch record: --pid " << pid << ": no such process\n";
      return 2;
    }
  }
  for (const auto& c : args.cgroups) {
    if (const std::string why = collectors::notACgroupV2(c); !why.empty()) {
      std::cerr << "stallwatch record: --cgroup " << c << ": " << why << "\n";
      return 2;
    }
  }
  jobs.wait_sample_hz = args.wait_sample_hz;
  options.collector_config.gpu.only = args.gpus;
  jobs.only_gpus = args.gpus;
  for (const auto& c : args.cgroups) jobs.cgroups.emplace_back(c);
  jobs.socket.path = args.socket.empty() ? collectors::defaultDataloaderSocketPath()
                                         : std::filesystem::path(args.socket);
  if (!toSocketOptions(args, jobs.socket)) return 2;
  for (const auto& [name, on] : args.collectors) {
    if (on) options.enabled_collectors.insert(name);
  }
  if (!toTimings(args, options)) return 2;
  if (!toHealthOptions(args, options)) return 2;
  if (auto live = toLiveOptions(args.live, "record")) {
    options.live = std::move(*live);
  } else {
    return 2;
  }
  // SIGHUP reads the config file again for what can change without a restart.
  options.reload = [fixed = std::map<std::string, std::string>{
                        {"interval", args.interval}, {"db", args.db}, {"retain", args.retain}}] {
    return reloadLiveOptions(commandLine(), "record", fixed);
  };

  // Every few seconds: a status line in a terminal, and the same words for `systemctl status`.
  const bool status_line = !args.quiet && stderrIsATerminal();
  if (status_line || std::getenv("NOTIFY_SOCKET")) {
    options.on_progress = [status_line](const agent::RecorderProgress& p) {
      const std::string text = progressText(p);
      if (status_line) showStatusLine(text);
      common::notifyServiceManager("STATUS=" + text);
    };
  }

  // Block the stop signals in this thread before any other starts, so that every thread
  // inherits the mask and the recorder alone takes them with sigtimedwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  agent::RecorderSummary summary;
  try {
    summary = agent::record(options, stop_signals);
    if (status_line) clearStatusLine();
  } catch (const storage::StoreError& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (const std::runtime_error& e) {  // --listen could not be bound
    spdlog::error("{}", e.what());
    return 1;
  }
  logSummary(summary, options.db_path);
  logLiveSummary(summary.incident_events, summary.notifier, summary.hooks, summary.webhook);
  if (summary.abandoned) {
    spdlog::error(
        "the database's disk did not answer within --stop-timeout: {} queued intervals were not "
        "written "
        "and the run is not closed in {}; stopping anyway",
        summary.unwritten_batches, options.db_path.string());
    spdlog::default_logger()->flush();
    // A thread is still blocked in a write on that disk: no destructor may wait for it.
    std::_Exit(1);
  }
  return summary.store_ok ? 0 : 1;
}

}  // namespace

CommandRunner addRecordCommand(CLI::App& app) {
  auto args = std::make_shared<RecordArgs>();
  CLI::App* cmd = app.add_subcommand(
      "record", "Sample disks, pressure and GPUs every interval into the SQLite database");
  cmd->add_option("--db", args->db,
                  "Database file (default: /var/lib/stallwatch/stallwatch.db as root, "
                  "~/.local/state/stallwatch/stallwatch.db otherwise)");
  cmd->add_option("--interval", args->interval, "Sampling interval, e.g. 500ms, 1s")
      ->capture_default_str();
  cmd->add_flag("--quiet", args->quiet,
                "No status line in a terminal (jobs followed, intervals written, incidents open)");
  cmd->add_option("--duration", args->duration,
                  "Stop after this long, e.g. 10s, 2h (default: until SIGINT/SIGTERM)");
  cmd->add_option("--flush-interval", args->flush_interval,
                  "Write to the database at most this often, in one transaction; a crash loses "
                  "at most this much (0s: every interval)")
      ->capture_default_str();
  cmd->add_option(
         "--stop-timeout", args->stop_timeout,
         "On a stop, wait this long for the last writes; past it (a frozen or hung disk under the "
         "database) say what was not written and exit 1")
      ->capture_default_str();
  cmd->add_option("--retain", args->retain,
                  "Keep this much history; older samples, events and incidents are pruned at start "
                  "and every "
                  "hour (0s: keep everything)")
      ->capture_default_str();
  cmd->add_option("--queue-capacity", args->queue_capacity,
                  "Intervals held in memory while the database is slow; the oldest are dropped "
                  "beyond this")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](const std::string& v) {
            const long n = std::strtol(v.c_str(), nullptr, 10);
            return n >= 1 ? std::string() : "must be at least 1 interval, not '" + v + "'";
          },
          "INT >= 1"));
  addRootOptions(*cmd, args->root);
  for (const auto& entry : collectors::collectorTable()) {
    args->collectors[entry.name] = entry.enabled_by_default;
    cmd->add_flag(
           "--collector." + entry.name + ",!--no-collector." + entry.name,
           args->collectors[entry.name],
           entry.help + (entry.enabled_by_default ? " (on by default)" : " (off by default)"))
        ->group("Collectors");
  }
  cmd->add_option("--nvml-library", args->nvml_library, "NVML library to load")
      ->capture_default_str()
      ->group("Collectors");
  cmd->add_option("--wait-sample-hz", args->wait_sample_hz,
                  "How often a second each job's main thread is looked at to see where it waits "
                  "(the input-wait share of a job without the dataloader hook) while a job is in "
                  "its first 5 minutes; 2 a second after (0: not at all)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0))
      ->group("Collectors");
  cmd->add_flag("--nvml-keep-zero-pages", args->nvml_keep_zero_pages,
                "Keep the pages NVML's init fills with zeros (by default they are given back: "
                "13.5 MB of the agent's 18 MB with driver 580)")
      ->group("Collectors");
  cmd->add_flag("--gpu-pcie,!--no-gpu-pcie", args->gpu_pcie,
                "Read PCIe throughput (off by default: NVML samples the link for ~21 ms per "
                "direction per GPU inside each call)")
      ->group("Collectors");
  cmd->add_flag("--gpu-processes,!--no-gpu-processes", args->gpu_processes,
                "Read per-process GPU utilisation")
      ->group("Collectors");
  cmd->add_option("--gpu-process-every", args->gpu_process_every,
                  "Read per-process GPU utilisation every N intervals, all its samples since the "
                  "last read at once (~2.7 ms of CPU per GPU per read)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3600u))
      ->group("Collectors");
  cmd->add_option("--gpu-utilization", args->gpu_utilization,
                  "Where GPU utilisation comes from: samples (the driver's sample buffer, the "
                  "interval's mean, ~2.7 ms of CPU per GPU), rates (its last sample period, "
                  "~0.4 us), auto (the buffer only for GPUs without GPM, which are judged by "
                  "utilisation alone)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "samples", "rates"}))
      ->group("Collectors");
  cmd->add_option("--pid", args->pids, "Follow the training job of this process (repeatable)")
      ->group("Jobs");
  cmd->add_option(
         "--gpu", args->gpus,
         "Only this GPU, by UUID or index (repeatable): its readings, and the jobs found on it; "
         "with --pid/--cgroup, one agent per job on a shared node")
      ->group("Jobs");
  cmd->add_option("--cgroup", args->cgroups,
                  "Follow the processes of this cgroup v2 directory as one job (repeatable)")
      ->check(CLI::ExistingDirectory)
      ->group("Jobs");
  cmd->add_option("--socket", args->socket,
                  "Dataloader socket (default /run/stallwatch/dataloader.sock as root, "
                  "$XDG_RUNTIME_DIR/stallwatch/dataloader.sock otherwise)")
      ->group("Jobs");
  cmd->add_option("--socket-mode", args->socket_mode,
                  "Permissions of the dataloader socket; 0666 lets every user's jobs report")
      ->capture_default_str()
      ->group("Jobs");
  cmd->add_option("--db-group", args->db_group,
                  "Share the recording with this group: the DB (0640) and its folder (0750) "
                  "readable by its members, so that a job's owner runs jobs, report and top on "
                  "the node without root (the package's default: the stallwatch group)");
  cmd->add_option("--socket-group", args->socket_group,
                  "Group of the dataloader socket: with the default mode 0660, the users of this "
                  "group may report their jobs' steps (docs/DATALOADER.md)")
      ->group("Jobs");
  cmd->add_option(
         "--health-interval", args->health_interval,
         "Read every drive's SMART / NVMe health this often (0s: off); a drive blamed for a stall "
         "is read at once")
      ->capture_default_str()
      ->group("Drive health");
  cmd->add_option(
         "--health-timeout", args->health_timeout,
         "Abandon a health read after this long (a hung drive is not asked again until it answers)")
      ->capture_default_str()
      ->group("Drive health");
  args->smartctl_option =
      cmd->add_option("--collector.smartctl", args->smartctl,
                      "Also read drives the native readers cannot reach (SAS/SCSI, USB bridges) "
                      "with smartctl "
                      "--json -x [=PATH to smartctl] on the health cadence (off by default)")
          ->expected(0, 1)
          ->group("Drive health");
  addLiveOptions(*cmd, args->live);
  return [args] { return runRecord(*args); };
}

}  // namespace stallwatch::cli
