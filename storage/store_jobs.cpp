// The Store's job rows: a job's description, processes, devices and ranks as they are found,
// and its per-interval samples and its ranks'.
#include <cmath>

#include "storage/sql_row.h"
#include "storage/store.h"

namespace stallwatch::storage {

int64_t Store::jobId(const std::string& key) {
  if (auto it = job_ids_.find(key); it != job_ids_.end()) return it->second;
  SQLite::Statement st(db_, "SELECT job_id FROM jobs WHERE job_key = ?");
  st.bind(1, key);
  if (!st.executeStep()) return 0;  // described in the same batch before use; see writeJobFacts
  const int64_t id = st.getColumn(0).getInt64();
  job_ids_.emplace(key, id);
  return id;
}

// Job descriptions first, so that the samples and facts of the same batch find their job.
void Store::writeJobFacts(const collectors::SampleBatch& b) {
  for (const auto& j : b.job_updates) {
    SQLite::Statement st(
        db_,
        "INSERT INTO jobs (job_key, label, root_pid, cmdline, labels, gpus, started_ms, ended_ms, "
        "last_seen_ms, cgroup_limits) VALUES (:job_key, :label, :root_pid, :cmdline, :labels, "
        ":gpus, :started_ms, :ended_ms, :last_seen_ms, :cgroup_limits) ON CONFLICT (job_key) DO "
        "UPDATE SET label=excluded.label, root_pid=excluded.root_pid, cmdline=excluded.cmdline, "
        "labels=excluded.labels, gpus=excluded.gpus, ended_ms=excluded.ended_ms, "
        "last_seen_ms=excluded.last_seen_ms, cgroup_limits=excluded.cgroup_limits "
        "RETURNING job_id");
    st.bind(":job_key", j.key);
    bindTextOrNull(st, ":label", j.label);
    st.bind(":root_pid", static_cast<int64_t>(j.root_pid));
    bindTextOrNull(st, ":cmdline", j.cmdline);
    bindTextOrNull(st, ":labels", j.labels);
    bindTextOrNull(st, ":gpus", joinList(j.gpus));  // comma-separated in the DB
    st.bind(":started_ms", j.started_ms);
    bindOptional(st, ":ended_ms", j.ended_ms);
    st.bind(":last_seen_ms", b.wall_time_ms);
    bindTextOrNull(st, ":cgroup_limits", j.cgroup_limits);
    st.executeStep();
    // The cache holds the jobs running: an ended one is looked up again if it comes back
    // (issue 46: a flood of short jobs grew it without end).
    if (j.ended_ms) {
      job_ids_.erase(j.key);
    } else {
      job_ids_[j.key] = st.getColumn(0).getInt64();
    }
  }
  for (const auto& p : b.job_processes) {
    const int64_t job = jobId(p.key);
    if (!job) continue;
    SQLite::Statement st(
        db_,
        "INSERT OR IGNORE INTO job_processes (job_id, pid, role, comm, first_seen_ms) "
        "VALUES (:job_id, :pid, :role, :comm, :first_seen_ms)");
    st.bind(":job_id", job);
    st.bind(":pid", static_cast<int64_t>(p.pid));
    st.bind(":role", p.role);
    bindTextOrNull(st, ":comm", p.comm);
    st.bind(":first_seen_ms", b.wall_time_ms);
    st.exec();
  }
  for (const auto& d : b.job_devices) {
    const int64_t job = jobId(d.key);
    if (!job) continue;
    SQLite::Statement st(
        db_,
        "INSERT INTO job_devices (job_id, device_id, via, open_files_seen, first_seen_ms, "
        "last_seen_ms) VALUES (:job_id, :device_id, :via, :open_files_seen, :first_seen_ms, "
        ":last_seen_ms) ON CONFLICT (job_id, device_id, via) DO UPDATE SET "
        "open_files_seen = open_files_seen + excluded.open_files_seen, "
        "last_seen_ms = excluded.last_seen_ms");
    st.bind(":job_id", job);
    st.bind(":device_id", deviceId(d.device, d.major, d.minor, b.wall_time_ms));
    st.bind(":via", d.via);
    st.bind(":open_files_seen", static_cast<int64_t>(d.open_files));
    st.bind(":first_seen_ms", b.wall_time_ms);
    st.bind(":last_seen_ms", b.wall_time_ms);
    st.exec();
  }
  const int64_t interval_ms = static_cast<int64_t>(std::llround(b.interval_seconds * 1000.0));
  for (const auto& j : b.jobs) {
    if (const int64_t job = jobId(j.key)) writeJobSample(j, job, b.wall_time_ms, interval_ms);
  }
  for (const auto& r : b.rank_updates) {
    const int64_t job = jobId(r.key);
    if (!job) continue;
    SQLite::Statement st(
        db_,
        "INSERT INTO job_ranks (job_id, rank, pid, gpu_uuid, first_seen_ms, last_seen_ms) "
        "VALUES (:job_id, :rank, :pid, :gpu_uuid, :first_seen_ms, :last_seen_ms) ON CONFLICT "
        "(job_id, rank) DO UPDATE SET pid = excluded.pid, "
        "gpu_uuid = coalesce(excluded.gpu_uuid, gpu_uuid), last_seen_ms = excluded.last_seen_ms");
    st.bind(":job_id", job);
    st.bind(":rank", r.rank);
    st.bind(":pid", static_cast<int64_t>(r.pid));
    bindTextOrNull(st, ":gpu_uuid", r.gpu);
    st.bind(":first_seen_ms", b.wall_time_ms);
    st.bind(":last_seen_ms", b.wall_time_ms);
    st.exec();
  }
  for (const auto& r : b.ranks) {
    if (const int64_t job = jobId(r.key)) writeRankSample(r, job, b.wall_time_ms, interval_ms);
  }
}

// One interval of a job's, by the prepared statement.
void Store::writeJobSample(const collectors::JobSample& j, int64_t job, int64_t ts_ms,
                           int64_t interval_ms) {
  auto& st = *insert_job_sample_;
  st.bind(":ts_ms", ts_ms);
  st.bind(":job_id", job);
  st.bind(":interval_ms", interval_ms);
  st.bind(":processes", static_cast<int64_t>(j.processes));
  st.bind(":workers", static_cast<int64_t>(j.workers));
  bindOptional(st, ":read_bytes_per_second", j.read_bytes_per_second);
  bindOptional(st, ":write_bytes_per_second", j.write_bytes_per_second);
  bindOptional(st, ":rchar_per_second", j.rchar_per_second);
  bindOptional(st, ":read_syscalls_per_second", j.read_syscalls_per_second);
  bindOptional(st, ":main_cpu_ratio", j.main_cpu_ratio);
  bindOptional(st, ":workers_cpu_ratio", j.workers_cpu_ratio);
  st.bind(":d_state_threads", static_cast<int64_t>(j.d_state_threads));
  bindTextOrNull(st, ":top_wchan", j.top_wchan);
  bindTextOrNull(st, ":sleep_wchan", j.sleep_wchan);
  bindOptional(st, ":main_thread_cpu_ratio", j.main_thread_cpu_ratio);
  bindOptional(st, ":main_thread_runqueue_ratio", j.main_thread_runqueue_ratio);
  st.bind(":stopped_processes", static_cast<int64_t>(j.stopped_processes));
  st.bind(":workers_sleep_wchan", j.workers_sleep_wchan);
  bindOptional(st, ":cpus_allowed", j.cpus_allowed);
  bindTextOrNull(st, ":cgroup_read_limit", j.cgroup_read_limit);
  bindOptional(st, ":main_thread_loader_wait_ratio", j.main_thread_loader_wait_ratio);
  bindOptional(st, ":main_thread_futex_wait_ratio", j.main_thread_futex_wait_ratio);
  st.bind(":pin_memory", j.pin_memory ? 1 : 0);
  bindOptional(st, ":steps", j.steps);
  bindOptional(st, ":samples", j.samples);
  bindOptional(st, ":data_wait_seconds", j.data_wait_seconds);
  bindOptional(st, ":step_seconds", j.step_seconds);
  bindOptional(st, ":gpu_util_percent", j.gpu_util_percent);
  bindOptional(st, ":gpu_work_percent", j.gpu_work_percent);
  bindOptional(st, ":cgroup_io_some", j.cgroup_io_some);
  bindOptional(st, ":cgroup_cpu_some", j.cgroup_cpu_some);
  bindOptional(st, ":cgroup_memory_some", j.cgroup_memory_some);
  bindOptional(st, ":cgroup_cpu_throttled_ratio", j.cgroup_cpu_throttled_ratio);
  bindOptional(st, ":cgroup_limited_read_bytes_per_second", j.cgroup_limited_read_bytes_per_second);
  bindOptional(st, ":cgroup_read_limit_bytes_per_second", j.cgroup_read_limit_bytes_per_second);
  // Written when they change: NULL means "as the row before".
  auto last = cgroup_limits_written_.find(job);
  if ((last == cgroup_limits_written_.end() && !j.cgroup_limits.empty()) ||
      (last != cgroup_limits_written_.end() && last->second != j.cgroup_limits)) {
    st.bind(":cgroup_limits", j.cgroup_limits);
    cgroup_limits_written_[job] = j.cgroup_limits;
  } else {
    st.bind(":cgroup_limits");
  }
  if (j.neighbour_io) {
    st.bind(":neighbour_io", *j.neighbour_io);
  } else {
    st.bind(":neighbour_io");
  }
  st.exec();
  st.reset();
}

// One interval of a rank's, by the prepared statement.
void Store::writeRankSample(const collectors::RankSample& r, int64_t job, int64_t ts_ms,
                            int64_t interval_ms) {
  auto& st = *insert_rank_sample_;
  st.bind(":ts_ms", ts_ms);
  st.bind(":job_id", job);
  st.bind(":rank", r.rank);
  st.bind(":interval_ms", interval_ms);
  st.bind(":processes", static_cast<int64_t>(r.processes));
  st.bind(":workers", static_cast<int64_t>(r.workers));
  bindOptional(st, ":read_bytes_per_second", r.read_bytes_per_second);
  bindOptional(st, ":write_bytes_per_second", r.write_bytes_per_second);
  bindOptional(st, ":main_cpu_ratio", r.main_cpu_ratio);
  bindOptional(st, ":workers_cpu_ratio", r.workers_cpu_ratio);
  st.bind(":d_state_threads", static_cast<int64_t>(r.d_state_threads));
  bindTextOrNull(st, ":top_wchan", r.top_wchan);
  bindOptional(st, ":main_thread_cpu_ratio", r.main_thread_cpu_ratio);
  bindOptional(st, ":main_thread_runqueue_ratio", r.main_thread_runqueue_ratio);
  st.bind(":stopped_processes", static_cast<int64_t>(r.stopped_processes));
  bindOptional(st, ":steps", r.steps);
  bindOptional(st, ":data_wait_seconds", r.data_wait_seconds);
  bindOptional(st, ":step_seconds", r.step_seconds);
  bindOptional(st, ":gpu_util_percent", r.gpu_util_percent);
  bindOptional(st, ":gpu_work_percent", r.gpu_work_percent);
  // The rank's own limits and waits: its straggler and limiter evidence after the fact (these
  // were in the statement but never bound, so every recording's ranks read NULL: issue 41).
  bindOptional(st, ":cgroup_limited_read_bytes_per_second", r.cgroup_limited_read_bytes_per_second);
  bindOptional(st, ":cgroup_read_limit_bytes_per_second", r.cgroup_read_limit_bytes_per_second);
  bindOptional(st, ":cgroup_cpu_throttled_ratio", r.cgroup_cpu_throttled_ratio);
  bindOptional(st, ":cgroup_io_some", r.cgroup_io_some);
  bindOptional(st, ":main_thread_loader_wait_ratio", r.main_thread_loader_wait_ratio);
  bindOptional(st, ":main_thread_futex_wait_ratio", r.main_thread_futex_wait_ratio);
  st.bind(":pin_memory", r.pin_memory ? 1 : 0);
  st.exec();
  st.reset();
}

}  // namespace stallwatch::storage
