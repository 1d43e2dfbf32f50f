// Reading a job's recorded series back out of the DB for the correlator, and keeping its
// incidents. The time axis is the job's own samples; every other series (its GPUs, its
// devices, host pressure) is aligned on the same tick timestamps, which one batch shares.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "correlator/stall_detector.h"

namespace stallwatch::storage {

struct JobRecord {
  int64_t job_id = 0;
  std::string key;
  std::string label;
  std::vector<std::string> gpu_uuids;
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
};

struct TimeRange {
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;
};

std::vector<JobRecord> listJobs(SQLite::Database& db, std::optional<int64_t> job_id = {});

// The job's series over RANGE: the devices the job had files on (job_reads), whole.
model::JobSeries loadJobSeries(SQLite::Database& db, const JobRecord& job, const TimeRange& range);

// Adds the host's other devices to SERIES, read only within WINDOWS (interval index ranges,
// inclusive): they appear in the evidence of incidents there and are never blamed. Reading
// them whole would cost a week's samples of every disk for a few minutes of evidence.
void addOtherDevices(SQLite::Database& db, const JobRecord& job, model::JobSeries& series,
                     const std::vector<std::pair<size_t, size_t>>& windows);

// Detection, then attribution with the other devices' samples around each incident.
correlator::Analysis analyzeStoredJob(SQLite::Database& db, const JobRecord& job,
                                      model::JobSeries& series,
                                      const correlator::DetectorConfig& config = {});

// Read-only connection tuned for scanning a large recording (memory-mapped, bigger cache),
// after checking that PATH is a stallwatch recording this version can read: one whose schema
// is MIN_VERSION (which adds what the caller NEEDS, e.g. "job tables") up to this version's.
// Throws StoreError saying what it is instead: missing, not SQLite, not stallwatch's, from
// an older version without NEEDS, or from a newer one.
SQLite::Database openForReading(const std::string& path, int min_version = 1, const char* needs = "");

// Throws StoreError unless DB is a stallwatch recording (schema 1 or later, with its runs
// table) of a version this stallwatch understands; returns that version.
int checkRecording(SQLite::Database& db, const std::string& path);

struct StoredIncident {
  int64_t incident_id = 0;
  int64_t job_id = 0;
  std::string job_label;
  model::Incident incident;
  std::string source;
  int64_t detected_ms = 0;
};

std::string evidenceJson(const std::vector<model::EvidenceItem>& evidence);
std::vector<model::EvidenceItem> parseEvidenceJson(const std::string& text);

// Binds an incident's stored fields (start_ms, end_ms, class, device, physical_device,
// idle_share, gpu_seconds_lost, confidence, evidence, straggler_rank, straggler_pid,
// straggler_gpu, waiting_ranks) from parameter FIRST on: the one column order every
// statement that writes incidents uses.
inline constexpr int kIncidentFields = 13;
void bindIncident(SQLite::Statement& st, int first, const model::Incident& incident);

// Replaces the job's incidents from SOURCE with INCIDENTS, in one transaction.
void replaceIncidents(SQLite::Database& db, int64_t job_id, const std::string& source,
                      const std::vector<model::Incident>& incidents, int64_t detected_ms);
std::vector<StoredIncident> readIncidents(SQLite::Database& db, std::optional<int64_t> job_id = {});

}  // namespace stallwatch::storage
