// The SQLite store: schema, migrations and the statements the writer uses. One Store is used
// by one thread (the writer's); readers open their own connection. WAL mode lets the sqlite3
// shell and `stallwatch report` read while the agent writes.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/devices/block_devices.h"
#include "collectors/gpu/gpu_driver.h"
#include "collectors/samples.h"
#include "health/drive_reading.h"
#include "health/verdict.h"
#include "model/incident.h"

namespace stallwatch::storage {

inline constexpr int kSchemaVersion = 14;

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file is not an SQLite database, is corrupt, or is shorter than its header says.
class CorruptDatabase : public StoreError {
 public:
  using StoreError::StoreError;
};

struct RunInfo {
  int64_t started_ms = 0;
  std::string hostname;
  std::string version;
  int64_t interval_ms = 0;
  std::string collectors;
};

struct AgentEvent {
  int64_t ts_ms = 0;
  std::string source;
  std::string level;  // info, warning, error
  std::string message;
};

struct HealthRecord {
  int64_t ts_ms = 0;
  health::DriveReading reading;
  health::HealthVerdict verdict;
};

// One event of an incident the live correlator found, and whether it was sent out.
struct LiveIncidentEvent {
  model::IncidentEvent event;
  bool notified = false;
};

class NamedStatement;  // sql_row.h

class Store {
 public:
  // Opens or creates the DB (mode 0600 when created, parent directory created 0750), sets
  // WAL, and migrates it to kSchemaVersion. Throws StoreError with a clear message on a file
  // that is not a stallwatch DB, is corrupt, or was written by a newer schema.
  static std::unique_ptr<Store> open(const std::filesystem::path& path, int busy_timeout_ms = 5000);
  // For the recorder: a corrupt or truncated DB is renamed to PATH.corrupt-<UTC time> (with
  // its -wal and -shm) and a new one started; MOVED_TO says where it went. Other errors
  // (permissions, a newer schema) are thrown as by open().
  static std::unique_ptr<Store> openOrMoveAside(const std::filesystem::path& path,
                                                std::string* moved_to, int busy_timeout_ms = 5000);
  // Renames PATH (and its -wal and -shm) to PATH.corrupt-<UTC time>; returns the new name.
  // Throws StoreError (saying WHY) if it cannot.
  static std::string moveAside(const std::filesystem::path& path, const std::string& why);
  // True for an error that says the file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB).
  static bool isCorruption(const std::exception& e);

  ~Store();  // where NamedStatement is whole
  SQLite::Database& db() { return db_; }
  int schemaVersion();

  int64_t beginRun(const RunInfo& run);
  void endRun(int64_t run_id, int64_t ended_ms, uint64_t dropped_batches);
  void upsertDevices(const collectors::DeviceTree& tree, int64_t seen_ms);
  // Writes all batches in one transaction.
  void writeBatches(const std::vector<collectors::SampleBatch>& batches);
  void writeEvent(int64_t run_id, const AgentEvent& event);
  // Open inserts the incident (source 'live'); change and close update it. Then the event.
  void writeIncidentEvent(int64_t run_id, const LiveIncidentEvent& event);
  void writeHealth(int64_t run_id, const HealthRecord& record);
  // Replaces the job's incidents from SOURCE (e.g. "recompute") with INCIDENTS, in one transaction.
  void replaceIncidents(int64_t job_id, const std::string& source,
                        const std::vector<model::Incident>& incidents, int64_t detected_ms);
  // Deletes samples, events and incidents older than CUTOFF_MS, a chunk per transaction so
  // that writes are never held up long. Returns the rows deleted.
  uint64_t pruneBefore(int64_t cutoff_ms);

 private:
  Store(const std::filesystem::path& path, int busy_timeout_ms);
  void migrate();
  int64_t deviceId(const std::string& name, uint32_t major, uint32_t minor, int64_t seen_ms);
  int64_t gpuId(uint32_t index, const std::string& uuid, int64_t seen_ms);
  int64_t jobId(const std::string& key);
  void writeJobFacts(const collectors::SampleBatch& batch);
  void writeJobSample(const collectors::JobSample& sample, int64_t job, int64_t ts_ms,
                      int64_t interval_ms);
  void writeRankSample(const collectors::RankSample& sample, int64_t job, int64_t ts_ms,
                       int64_t interval_ms);
  void writeGpuDescriptions(const std::vector<collectors::GpuInfo>& gpus, int64_t seen_ms);
  void writeNfsSample(int64_t ts_ms, int64_t device_id, const collectors::NfsRates& n);
  void writeBatchesInTransaction(const std::vector<collectors::SampleBatch>& batches);

  SQLite::Database db_;
  std::unique_ptr<NamedStatement> insert_disk_;
  std::map<int64_t, std::string> cgroup_limits_written_;  // by job_id: the last written
  std::unique_ptr<NamedStatement> insert_nfs_;
  std::unique_ptr<NamedStatement> insert_pressure_;
  std::unique_ptr<NamedStatement> insert_cpu_;
  std::unique_ptr<NamedStatement> insert_gpu_;
  std::unique_ptr<NamedStatement> insert_gpu_process_;
  std::unique_ptr<NamedStatement> touch_device_;
  std::map<std::tuple<std::string, uint32_t, uint32_t>, int64_t> device_ids_;
  std::map<std::string, int64_t> gpu_ids_;
  std::map<std::string, int64_t> job_ids_;
  std::map<uint64_t, int64_t> live_incident_ids_;  // live_id -> incident_id
  std::unique_ptr<NamedStatement> insert_job_sample_;
  std::unique_ptr<NamedStatement> insert_rank_sample_;
  std::unique_ptr<NamedStatement> insert_io_latency_;
};

// The SQL that takes a database from VERSION-1 to VERSION (1-based); null past the last.
const char* migrationSql(int version);

// Where the DB lives unless --db says otherwise: /var/lib/stallwatch/stallwatch.db for root,
// $XDG_STATE_HOME/stallwatch/stallwatch.db (default ~/.local/state) for anyone else.
std::filesystem::path defaultDatabasePath();
// The DB at PATH (its -wal and -shm, which SQLite makes with the DB's owner and mode, and its
// folder) readable by group GID: 0640 and 0750. Why not ("" where done).
std::string shareWithGroup(const std::filesystem::path& path, gid_t gid);
inline constexpr const char* kServiceDatabase = "/var/lib/stallwatch/stallwatch.db";
// What a reader (jobs, report, incidents, top, export) opens unless --db says otherwise: the
// service's DB wherever it exists, for anyone (issue 43: a job's owner got an empty DB of their
// own under ~/.local/state, silently); else defaultDatabasePath().
std::filesystem::path defaultReadingPath();

}  // namespace stallwatch::storage
