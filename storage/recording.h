// A recording opened for reading: the one place that knows the tables, their columns and
// which schema version added what. Every reader (report, incidents, jobs, health --db, replay,
// the fleet post-mortem) goes through it; nothing outside storage/ writes SQL.
//
// A job's series come back aligned on the job's own sample timestamps (one batch shares one
// tick), ready for the correlator's analysis (model/series.h).
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/samples.h"
#include "health/drive_reading.h"
#include "model/io_latency_histogram.h"
#include "model/node_sample.h"
#include "model/recording.h"
#include "model/series.h"
#include "storage/incident_store.h"

namespace stallwatch::storage {

// The records read back (model/recording.h).
using model::IoLatencySummary;
using model::JobRecord;

struct TimeRange {
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;
};

// Interval index ranges of a job's series, inclusive.
using IntervalWindows = std::vector<std::pair<size_t, size_t>>;

// A job's activity over its whole sampled life, as `stallwatch jobs` lists it.
struct JobActivity {
  int64_t processes = 0, workers = 0;
  std::optional<double> steps_per_second;       // none: the job never reported steps
  std::optional<double> data_wait_share;        // of the loop's time
  std::optional<double> read_bytes_per_second;  // mean
  std::optional<double> workers_cpu;            // mean, 1.0 = one core
  int64_t max_d_state = 0;
  struct Device {
    std::string name, via;
    int64_t open_files = 0;
  };
  std::vector<Device> devices;
  struct Rank {
    int64_t rank = 0, pid = 0;
    std::string gpu;
    std::optional<double> steps_per_second, data_wait_share, read_bytes_per_second, gpu_util,
        gpu_work;
    int64_t max_d_state = 0;
  };
  std::vector<Rank> ranks;  // jobs of two or more ranks (schema 6)
};

// A drive's health verdict as recorded, and the first counter behind it.
struct DriveHealthNote {
  std::string verdict;
  std::string first_evidence;  // "ata 5 Reallocated_Sector_Ct raw 304"
};

// One recorded reading of a drive.
struct RecordedReading {
  int64_t ts_ms = 0;
  health::DriveReading reading;
};

struct ReplayStats {
  uint64_t batches = 0;
  int64_t first_ms = 0;
  int64_t last_ms = 0;
};

// PATH as a file: URI.
std::string fileUri(const std::string& path);
// The file: URI that opens PATH read-only where it lies on a read-only filesystem (immutable:
// SQLite can make no WAL index there), or in a folder this reader cannot write with no -wal
// beside it; nullopt where the plain path will do.
std::optional<std::string> readOnlyMountUri(const std::string& path);

class Recording {
 public:
  // What a reader needs of the schema; an older recording without it is refused by name.
  enum class Needs { kAnything = 1, kJobTables = 2, kIncidents = 3, kDriveHealth = 5 };

  // Opens PATH read-only (memory-mapped, a bigger cache: reports scan large files) after
  // checking that it is a stallwatch recording of a version this one reads and has NEEDS.
  // Throws StoreError saying what it is instead: missing, not SQLite, not stallwatch's, from
  // an older version without NEEDS, or from a newer one.
  static Recording open(const std::string& path, Needs needs = Needs::kAnything);

  const std::string& path() const { return path_; }
  int schemaVersion() const { return version_; }

  // The jobs table, the one way it is read: every job, or the one with JOB_ID.
  std::vector<JobRecord> jobs(std::optional<int64_t> job_id = {});
  // The jobs of one run of a launcher: RUN_ID as Slurm (SLURM_JOB_ID, key slurm:ID) or torchrun
  // (TORCHELASTIC_RUN_ID, key torchelastic:ID) gave it, or a job key as `jobs` lists it.
  std::vector<JobRecord> jobsOfRun(const std::string& run_id);
  JobActivity activity(const JobRecord& job);

  // How much of a job's series to read.
  enum class Detail {
    kFull,  // its own samples, its GPUs', host pressure, its devices (whole), its ranks
    // What a report across nodes judges this node by: the job's own samples and one rank
    // standing for all of this node's (its lowest rank number): in each interval the least busy
    // GPU and the longest data wait among them, as a synchronous job moves at its slowest
    // rank's pace (its gpu_util_percent, gpu_work_percent and data_wait_s; its other series,
    // and the job's step_s and pressure, are left empty). No devices or per-rank series: a
    // day of 8 ranks stays small.
    kNodeSummary,
  };
  // Detail::kNodeSummary's figures a row at a time, in time order, to SINK (with FIELDS
  // kProgress, only the job's progress): what a report across nodes merges as it reads, so that
  // a node's day is never held whole. Its host pressure is not read (kNodeSummary has none).
  void nodeSamples(const JobRecord& job, const TimeRange& range, model::NodeSampleFields fields,
                   const model::NodeSampleSink& sink);
  // The host's own series over RANGE, for a recording (or range) without a job: the interval
  // grid of its device samples, the host's I/O and CPU pressure, and every device with samples
  // there (job_reads false). Empty without device samples.
  model::JobSeries hostSeries(const TimeRange& range);
  // Every I/O's latency (the eBPF collector's) over (FROM_MS, TO_MS], per device and operation:
  // all of it, JOB's own and everyone else's. Empty before schema 12 or without the collector.
  std::vector<IoLatencySummary> ioLatency(const JobRecord& job, int64_t from_ms, int64_t to_ms);
  // The job's series over RANGE, as much of it as DETAIL says.
  model::JobSeries jobSeries(const JobRecord& job, const TimeRange& range,
                             Detail detail = Detail::kFull);
  // The global ranks the job ran on this host: its job_ranks rows (schema 6), else the RANK its
  // environment gave (labels); empty if neither says.
  std::vector<int32_t> ranksOf(const JobRecord& job);
  // The host that recorded it: the hostname of its latest run.
  std::string hostName();
  // The span of the job's samples within RANGE, without reading them: from the start of the
  // first one's interval to the end of the last one; none without samples there.
  std::optional<std::pair<int64_t, int64_t>> sampleSpan(const JobRecord& job,
                                                        const TimeRange& range);
  // Adds the host's other devices to SERIES, read only within WINDOWS: they appear in the
  // evidence of incidents there and are never blamed. Reading them whole would cost a week's
  // samples of every disk for a few minutes of evidence.
  void addOtherDevices(const JobRecord& job, model::JobSeries& series,
                       const IntervalWindows& windows);

  // What serves each storage target that is a mount (NFS server, FUSE daemon, the devices
  // under an overlay), "KIND: WHAT" by target name; empty before schema 7.
  std::map<std::string, std::string> mountTargetsServedBy();

  // The drive's last verdict at or before UNTIL_MS; none before schema 5 or if never read.
  std::optional<DriveHealthNote> driveHealthAt(const std::string& device, int64_t until_ms);
  // Each drive's newest reading and the one before it (oldest first), by device.
  std::map<std::string, std::vector<RecordedReading>> latestDriveReadings();

  std::vector<StoredIncident> incidents(std::optional<int64_t> job_id = {});
  // The incidents the agent found live that were open at AT_MS (schema 4): opened by then and
  // not closed by then. One left open by an agent that stopped stays open: its end_ms says
  // when it was last updated.
  std::vector<StoredIncident> openIncidents(int64_t at_ms);

  // Turns the recording back into the batches the agent produced, tick by tick, and calls FN
  // with each, in time order; FN returns false to stop early. Streams: memory does not grow
  // with the recording's length (storage/recording_replay.cpp).
  ReplayStats replay(const std::function<bool(collectors::SampleBatch&)>& fn);

 private:
  Recording(std::string path, SQLite::Database db, int version);

  std::string path_;
  SQLite::Database db_;
  int version_ = 0;
};

}  // namespace stallwatch::storage
