#include "storage/export.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>

#include "storage/store.h"

namespace stallwatch::storage {
namespace {

std::vector<std::string> columnsOf(SQLite::Database& db, const std::string& schema,
                                   const std::string& table) {
  std::vector<std::string> out;
  SQLite::Statement q(db, "SELECT name FROM pragma_table_info(:table, :schema)");
  q.bind(":table", table);
  q.bind(":schema", schema);
  while (q.executeStep()) out.push_back(q.getColumn(0).getString());
  return out;
}

// Copies TABLE's rows that match WHERE from src into main, the columns both have (a source of
// an older schema lacks some; they stay NULL). Returns the rows copied.
int64_t copyRows(SQLite::Database& db, const std::string& table, const std::string& where,
                 int64_t from_ms, int64_t to_ms, const std::string& job_ids) {
  const auto target = columnsOf(db, "main", table);
  const auto source = columnsOf(db, "src", table);
  std::string columns;
  for (const auto& c : target) {
    if (std::find(source.begin(), source.end(), c) != source.end())
      columns += (columns.empty() ? "" : ", ") + c;
  }
  if (columns.empty()) return 0;  // a table the source's schema does not have
  SQLite::Statement st(db, "INSERT INTO main." + table + " (" + columns + ") SELECT " + columns +
                               " FROM src." + table + " AS t WHERE " + where);
  // Each WHERE names only some of the parameters (index 0: not in this statement).
  for (const auto& [name, value] : {std::pair{":from_ms", from_ms}, std::pair{":to_ms", to_ms}}) {
    if (st.getIndex(name) > 0) st.bind(name, value);
  }
  if (st.getIndex(":jobs") > 0) st.bind(":jobs", job_ids);
  return st.exec();
}

}  // namespace

ExportResult exportJobs(const std::filesystem::path& source, const std::vector<JobRecord>& jobs,
                        const TimeRange& range, const std::filesystem::path& out) {
  if (jobs.empty()) throw StoreError("no job to export");
  std::error_code ec;
  if (std::filesystem::exists(out, ec))
    throw StoreError(out.string() + " exists; not overwriting it");
  // The span: from the first job's start to the last one's end (or last sample), within RANGE.
  auto recording = Recording::open(source.string(), Recording::Needs::kJobTables);
  ExportResult result;
  result.from_ms = INT64_MAX;
  result.to_ms = INT64_MIN;
  std::string job_ids;  // ",1,4," for instr()
  for (const auto& job : jobs) {
    const auto span = recording.sampleSpan(job, range);
    if (!span) continue;
    result.from_ms = std::min(result.from_ms, span->first);
    result.to_ms = std::max(result.to_ms, span->second);
    job_ids += (job_ids.empty() ? "," : "") + std::to_string(job.job_id) + ",";
  }
  if (job_ids.empty()) throw StoreError("the job has no samples in the range; nothing to export");

  const std::filesystem::path partial = out.string() + ".partial";
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(partial.string() + suffix, ec);
  try {
    auto store = Store::open(partial);  // stallwatch's schema, this version
    SQLite::Database& db = store->db();
    {
      SQLite::Statement attach(db, "ATTACH DATABASE :path AS src");
      attach.bind(":path", readOnlyMountUri(source.string()).value_or(source.string()));
      attach.exec();
    }
    SQLite::Transaction tx(db);
    const std::string of_jobs = "instr(:jobs, ',' || t.job_id || ',') > 0";
    // A sample at TS covers the interval ending at TS: (from_ms, to_ms] is the span.
    const std::string in_span = "t.ts_ms > :from_ms AND t.ts_ms <= :to_ms";
    const std::pair<const char*, std::string> tables[] = {
        {"runs",
         "t.started_ms <= :to_ms AND coalesce(t.ended_ms, 9223372036854775807) >= :from_ms"},
        {"block_devices", "1"},
        {"mounts", "1"},
        {"gpus", "1"},
        {"jobs", of_jobs},
        {"job_devices", of_jobs},
        {"job_processes", of_jobs},
        {"job_ranks", of_jobs},
        {"job_samples", of_jobs + " AND " + in_span},
        {"rank_samples", of_jobs + " AND " + in_span},
        {"disk_samples", in_span},
        {"nfs_samples", in_span},
        {"pressure_samples", in_span},
        {"cpu_samples", in_span},
        // The job's GPUs only: another job's GPUs on the same node are not this job's story.
        {"gpu_samples",
         in_span + " AND t.gpu_id IN (SELECT g.gpu_id FROM src.gpus g JOIN src.jobs j ON instr("
                   "',' || j.gpus || ',', ',' || g.uuid || ',') > 0 WHERE instr(:jobs, ',' || "
                   "j.job_id || ',') > 0)"},
        {"incidents", of_jobs},
        {"incident_events",
         "t.incident_id IN (SELECT incident_id FROM src.incidents i WHERE instr(:jobs, ',' || "
         "i.job_id || ',') > 0)"},
        // A drive's verdict at the span's start is its last reading before it.
        {"drive_health",
         "t.ts_ms <= :to_ms AND t.ts_ms >= coalesce((SELECT max(d.ts_ms) FROM src.drive_health d "
         "WHERE d.device = t.device AND d.ts_ms <= :from_ms), :from_ms)"},
        {"agent_events", in_span},
        // Per-I/O latency: the job's own rows and everyone else's; another followed job's rows
        // are added below as others', that job not being in the slice.
        {"io_latency_samples", in_span + " AND (t.job_id IS NULL OR " + of_jobs + ")"},
    };
    for (const auto& [table, where] : tables) {
      SQLite::Statement q(db,
                          "SELECT 1 FROM src.sqlite_master WHERE type = 'table' AND name = :name");
      q.bind(":name", table);
      if (!q.executeStep()) continue;  // a table the source's schema does not have yet
      result.rows[table] = copyRows(db, table, where, result.from_ms, result.to_ms, job_ids);
    }
    if (result.rows.contains("io_latency_samples")) {
      SQLite::Statement others(
          db,
          "INSERT INTO main.io_latency_samples (ts_ms, device_id, interval_ms, op, job_id, count, "
          "mean_ms, service_mean_ms, p50_ms, p99_ms, p999_ms, slots) SELECT ts_ms, device_id, "
          "interval_ms, op, NULL, count, mean_ms, service_mean_ms, p50_ms, p99_ms, p999_ms, slots "
          "FROM src.io_latency_samples AS t WHERE " +
              in_span + " AND t.job_id IS NOT NULL AND NOT (" + of_jobs + ")");
      others.bind(":from_ms", result.from_ms);
      others.bind(":to_ms", result.to_ms);
      others.bind(":jobs", job_ids);
      result.rows["io_latency_samples"] += others.exec();
    }
    {
      SQLite::Statement host(db, "SELECT hostname FROM main.runs ORDER BY started_ms DESC LIMIT 1");
      if (host.executeStep()) result.hostname = host.getColumn(0).getString();
    }
    tx.commit();
    db.exec("DETACH DATABASE src");
    // A slice is a finished file to copy and read elsewhere: a rollback journal, not WAL, so
    // that it is one file and its readers leave no -wal and -shm beside it.
    db.exec("PRAGMA journal_mode=DELETE");
  } catch (...) {
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(partial.string() + suffix, ec);
    throw;
  }
  std::filesystem::rename(partial, out, ec);
  if (ec)
    throw StoreError("cannot move " + partial.string() + " to " + out.string() + ": " +
                     ec.message());
  return result;
}

}  // namespace stallwatch::storage
