#include "storage/recording.h"

#include <grp.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "health/reading_json.h"
#include "model/run.h"
#include "storage/runs_across_nodes.h"
#include "storage/sql_row.h"
#include "storage/store.h"

namespace stallwatch::storage {
namespace {

// Throws StoreError unless DB is a stallwatch recording (schema 1 or later, with its runs
// table) of a version this stallwatch understands; returns that version.
int checkRecording(SQLite::Database& db, const std::string& path) {
  int version = 0;
  bool has_runs = false;
  try {
    version = db.execAndGet("PRAGMA user_version").getInt();
    has_runs = db.tableExists("runs");
  } catch (const SQLite::Exception& e) {
    // SQLite reads a WAL database through its -shm, which it must be able to make or write.
    if (e.getErrorCode() == SQLITE_READONLY || e.getErrorCode() == SQLITE_CANTOPEN) {
      throw StoreError(path +
                       " cannot be read by this user: its -wal or -shm beside it, or its folder, "
                       "is not writable here (read it as its owner, or copy the .db with its "
                       "-wal to a folder of your own)");
    }
    throw StoreError(path + " is not a readable SQLite database: " + e.what());
  }
  if (version < 1 || !has_runs) {
    throw StoreError(
        path + " is not a stallwatch database (no stallwatch schema in it); nothing was changed");
  }
  if (version > kSchemaVersion) {
    throw StoreError(path + " has schema version " + std::to_string(version) +
                     ", newer than this stallwatch (" + std::to_string(kSchemaVersion) +
                     ") understands; use a newer stallwatch");
  }
  return version;
}

const char* whatNeeds(Recording::Needs needs) {
  switch (needs) {
    case Recording::Needs::kAnything:
      return "";
    case Recording::Needs::kJobTables:
      return "job tables";
    case Recording::Needs::kIncidents:
      return "incidents table yet; run with --recompute to compute them";
    case Recording::Needs::kDriveHealth:
      return "drive health table";
  }
  return "";
}

}  // namespace

std::string fileUri(const std::string& path) {
  std::string out = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {  // RFC 3986's reserved characters of a path
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += '%';
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 0xF];
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> readOnlyMountUri(const std::string& path) {
  // On a read-only filesystem SQLite cannot make the WAL index (-shm) a reader of a WAL
  // database needs: opened immutable there, as nothing on it can change under the reader.
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0)
    return fileUri(path) + "?immutable=1";
  // Likewise in a directory this reader cannot write (a 0644 recording in another user's
  // folder, issue 46), where no -wal file says a writer has it open or left data outside the
  // file: everything is in the file, and nothing writes it.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  struct stat wal {};
  if (::access(dir.empty() ? "." : dir.c_str(), W_OK) != 0 &&
      ::stat((path + "-wal").c_str(), &wal) != 0 && errno == ENOENT)
    return fileUri(path) + "?immutable=1";
  return std::nullopt;
}

Recording::Recording(std::string path, SQLite::Database db, int version)
    : path_(std::move(path)), db_(std::move(db)), version_(version) {}

namespace {

// The reader may not read PATH: who may, and how to become one of them (a group that reads it).
std::string permissionDenied(const std::string& path) {
  std::string out = path + ": permission denied";
  struct stat st {};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const bool known =
      ::stat(path.c_str(), &st) == 0 || ::stat(dir.empty() ? "." : dir.c_str(), &st) == 0;
  if (!known) return out;
  const group* g = ::getgrgid(st.st_gid);
  if (g && st.st_gid != 0 && (st.st_mode & S_IRGRP)) {
    return out + " (readable by its group '" + g->gr_name + "': `sudo usermod -aG " + g->gr_name +
           " $USER`, then log in again)";
  }
  return out +
         " (readable by its owner only: run as root, or have the agent share it with a "
         "group, `record --db-group`)";
}

}  // namespace

Recording Recording::open(const std::string& path, Needs needs) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || ::access(path.c_str(), R_OK) != 0) {
    const int err = errno;
    if (err == EACCES) throw StoreError(permissionDenied(path));
    throw StoreError(path +
                     (err == ENOENT ? ": no such file" : ": " + std::string(std::strerror(err))));
  }
  // Opening a FIFO would wait for a writer, deaf to signals; a device is no recording.
  if (!S_ISREG(st.st_mode))
    throw StoreError(path +
                     " is not a regular file (a FIFO, a device or a folder): not a recording");
  const std::optional<std::string> uri = readOnlyMountUri(path);
  // One thread uses this connection: SQLite's per-call mutexes are pure cost (10 % of a report).
  SQLite::Database db(uri.value_or(path),
                      SQLite::OPEN_READONLY | SQLite::OPEN_NOMUTEX | (uri ? SQLite::OPEN_URI : 0));
  const int version = checkRecording(db, path);
  if (version < static_cast<int>(needs)) {
    throw StoreError(path + " has no " + whatNeeds(needs) +
                     " (recorded by an older stallwatch, schema " + std::to_string(version) + ")");
  }
  db.exec("PRAGMA mmap_size = 17179869184");  // up to 16 GiB mapped: reads without copies
  db.exec("PRAGMA cache_size = -65536");      // 64 MiB
  return Recording(path, std::move(db), version);
}

std::vector<JobRecord> Recording::jobs(std::optional<int64_t> job_id) {
  std::vector<JobRecord> jobs;
  if (version_ < 2) return jobs;  // no job tables before schema 2
  SQLite::Statement q(
      db_,
      "SELECT job_id, job_key, coalesce(label, '') AS label, coalesce(labels, '') AS labels, "
      "coalesce(cmdline, '') AS cmdline, root_pid, coalesce(gpus, '') AS gpus, started_ms, "
      "ended_ms, " +
          std::string(version_ >= 8 ? "coalesce(cgroup_limits, '')" : "''") +
          " AS cgroup_limits FROM jobs WHERE :job_id IS NULL OR job_id = :job_id "
          "ORDER BY started_ms");
  bindOptional(q, ":job_id", job_id);
  const Columns c(q);
  while (q.executeStep()) {
    JobRecord j;
    j.job_id = c.int64("job_id");
    j.key = c.text("job_key");
    j.label = c.text("label");
    j.labels = c.text("labels");
    j.cmdline = c.text("cmdline");
    j.root_pid = c.int64("root_pid");
    for (auto& uuid : splitList(c.text("gpus"))) {
      if (!uuid.empty()) j.gpu_uuids.push_back(std::move(uuid));
    }
    j.started_ms = c.int64("started_ms");
    j.ended_ms = c.optionalInt64("ended_ms");
    j.cgroup_limits = c.text("cgroup_limits");
    jobs.push_back(std::move(j));
  }
  return jobs;
}

std::vector<JobRecord> Recording::jobsOfRun(const std::string& run_id) {
  std::vector<JobRecord> out;
  for (auto& job : jobs()) {
    const std::string run = runKeyOf(job);  // a cgroup's job: the run its environment names
    if (job.key == run_id || run == run_id || run == "slurm:" + run_id ||
        run == "torchelastic:" + run_id) {
      out.push_back(std::move(job));
    }
  }
  return out;
}

JobActivity Recording::activity(const JobRecord& job) {
  JobActivity a;
  SQLite::Statement p(db_,
                      "SELECT count(*) AS processes, coalesce(sum(role = 'worker'), 0) AS workers "
                      "FROM job_processes WHERE job_id = :job_id");
  p.bind(":job_id", job.job_id);
  if (p.executeStep()) {
    const Columns c(p);
    a.processes = c.int64("processes");
    a.workers = c.int64("workers");
  }
  // Steps per second over the job's sampled lifetime, and the share of the loop's time
  // spent waiting for data (NULL for jobs that never reported through the socket).
  SQLite::Statement s(
      db_,
      "SELECT CASE WHEN count(steps) > 0 THEN total(steps) * 1000.0 / nullif(sum(interval_ms), 0) "
      "END "
      "AS steps_per_second, "
      "sum(data_wait_seconds) / nullif(sum(data_wait_seconds) + sum(step_seconds), 0) AS "
      "data_wait_share, "
      "avg(read_bytes_per_second) AS read_bytes_per_second, avg(workers_cpu_ratio) AS workers_cpu, "
      "coalesce(max(d_state_threads), 0) AS max_d_state FROM job_samples WHERE job_id = :job_id");
  s.bind(":job_id", job.job_id);
  if (s.executeStep()) {
    const Columns c(s);
    a.steps_per_second = c.optionalReal("steps_per_second");
    a.data_wait_share = c.optionalReal("data_wait_share");
    a.read_bytes_per_second = c.optionalReal("read_bytes_per_second");
    a.workers_cpu = c.optionalReal("workers_cpu");
    a.max_d_state = c.int64("max_d_state");
  }
  SQLite::Statement d(db_,
                      "SELECT b.name, jd.via, jd.open_files_seen FROM job_devices jd "
                      "JOIN block_devices b USING (device_id) WHERE jd.job_id = :job_id "
                      "ORDER BY jd.via <> '', b.name");
  d.bind(":job_id", job.job_id);
  const Columns dc(d);
  while (d.executeStep())
    a.devices.push_back({dc.text("name"), dc.text("via"), dc.int64("open_files_seen")});
  if (version_ < 6) return a;
  SQLite::Statement r(db_,
                      "SELECT r.rank, r.pid, coalesce(r.gpu_uuid, '') AS gpu, "
                      "CASE WHEN count(s.steps) > 0 THEN total(s.steps) * 1000.0 / "
                      "nullif(sum(s.interval_ms), 0) END "
                      "AS steps_per_second, "
                      "sum(s.data_wait_seconds) / nullif(sum(s.data_wait_seconds) + "
                      "sum(s.step_seconds), 0) AS data_wait_share, "
                      "avg(s.read_bytes_per_second) AS read_bytes_per_second, "
                      "coalesce(max(s.d_state_threads), 0) AS max_d_state, "
                      "avg(s.gpu_util_percent) AS gpu_util, avg(s.gpu_work_percent) AS gpu_work "
                      "FROM job_ranks r LEFT JOIN rank_samples s USING (job_id, rank) "
                      "WHERE r.job_id = :job_id GROUP BY r.rank ORDER BY r.rank");
  r.bind(":job_id", job.job_id);
  const Columns rc(r);
  while (r.executeStep()) {
    JobActivity::Rank k;
    k.rank = rc.int64("rank");
    k.pid = rc.int64("pid");
    k.gpu = rc.text("gpu");
    k.steps_per_second = rc.optionalReal("steps_per_second");
    k.data_wait_share = rc.optionalReal("data_wait_share");
    k.read_bytes_per_second = rc.optionalReal("read_bytes_per_second");
    k.max_d_state = rc.int64("max_d_state");
    k.gpu_util = rc.optionalReal("gpu_util");
    k.gpu_work = rc.optionalReal("gpu_work");
    a.ranks.push_back(std::move(k));
  }
  return a;
}

std::vector<int32_t> Recording::ranksOf(const JobRecord& job) {
  std::vector<int32_t> ranks;
  if (version_ >= 6) {
    SQLite::Statement q(db_, "SELECT rank FROM job_ranks WHERE job_id = :job_id ORDER BY rank");
    q.bind(":job_id", job.job_id);
    while (q.executeStep()) ranks.push_back(q.getColumn(0).getInt());
  }
  if (!ranks.empty()) return ranks;
  if (const auto rank = model::labelNumber(job.labels, "RANK")) ranks.push_back(*rank);
  return ranks;
}

std::string Recording::hostName() {
  SQLite::Statement q(db_, "SELECT hostname FROM runs ORDER BY started_ms DESC LIMIT 1");
  return q.executeStep() ? q.getColumn(0).getString() : std::string();
}

std::map<std::string, std::string> Recording::mountTargetsServedBy() {
  std::map<std::string, std::string> served;
  if (version_ < 7) return served;
  SQLite::Statement q(db_,
                      "SELECT name, kind, served_by FROM block_devices WHERE served_by IS NOT NULL "
                      "ORDER BY last_seen_ms");
  while (q.executeStep()) {
    const Columns c(q);
    served[c.text("name")] = c.text("kind") + ": " + c.text("served_by");
  }
  return served;
}

std::optional<DriveHealthNote> Recording::driveHealthAt(const std::string& device,
                                                        int64_t until_ms) {
  if (version_ < 5) return std::nullopt;
  SQLite::Statement q(
      db_,
      "SELECT verdict, evidence FROM drive_health WHERE device = :device AND ts_ms <= :until_ms "
      "ORDER BY ts_ms DESC LIMIT 1");
  q.bind(":device", device);
  q.bind(":until_ms", until_ms);
  if (!q.executeStep()) return std::nullopt;
  const Columns c(q);
  DriveHealthNote note;
  note.verdict = c.text("verdict");
  const auto evidence = nlohmann::json::parse(c.text("evidence"), nullptr, false);
  if (evidence.is_array() && !evidence.empty() && evidence[0].is_object()) {
    note.first_evidence = evidence[0].value("counter", "") + " " + evidence[0].value("value", "");
  }
  return note;
}

std::map<std::string, std::vector<RecordedReading>> Recording::latestDriveReadings() {
  std::map<std::string, std::vector<RecordedReading>> readings;
  if (version_ < 5) return readings;
  SQLite::Statement q(
      db_,
      "SELECT device, ts_ms, reading FROM drive_health d WHERE ts_ms >= coalesce("
      "(SELECT ts_ms FROM drive_health WHERE device = d.device ORDER BY ts_ms DESC LIMIT 1 "
      "OFFSET 1), 0) ORDER BY device, ts_ms");
  const Columns c(q);
  while (q.executeStep()) {
    const auto j = nlohmann::json::parse(c.text("reading"), nullptr, false);
    readings[c.text("device")].push_back({c.int64("ts_ms"), health::readingFromJson(j)});
  }
  return readings;
}

std::vector<StoredIncident> Recording::incidents(std::optional<int64_t> job_id) {
  if (version_ < 3) return {};
  return readIncidents(db_, version_, job_id);
}

std::vector<StoredIncident> Recording::openIncidents(int64_t at_ms) {
  if (version_ < 4) return {};
  return readIncidents(db_, version_, std::nullopt, at_ms);
}

std::vector<IoLatencySummary> Recording::ioLatency(const JobRecord& job, int64_t from_ms,
                                                   int64_t to_ms) {
  std::vector<IoLatencySummary> out;
  if (version_ < 12) return out;
  SQLite::Statement q(db_,
                      "SELECT d.name AS device, l.op AS op, l.job_id AS job_id, l.count AS count, "
                      "l.slots AS slots FROM io_latency_samples l JOIN block_devices d "
                      "USING (device_id) WHERE l.ts_ms > :from_ms AND l.ts_ms <= :to_ms");
  q.bind(":from_ms", from_ms);
  q.bind(":to_ms", to_ms);
  const Columns c(q);
  // Each row read once into the job's or everyone else's; all of them is the two together.
  std::map<std::pair<std::string, std::string>, IoLatencySummary> by;
  while (q.executeStep()) {
    const std::optional<int64_t> owner = c.optionalInt64("job_id");
    by[{c.text("device"), c.text("op")}].add(
        owner && *owner == job.job_id, static_cast<uint64_t>(c.int64("count")), c.text("slots"));
  }
  for (auto& [key, s] : by) {
    s.device = key.first;
    s.op = key.second;
    for (size_t i = 0; i < s.all.size(); ++i) s.all[i] = s.job[i] + s.others[i];
    s.all_count = s.job_count + s.others_count;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stallwatch::storage
