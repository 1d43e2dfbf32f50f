#include "storage/store.h"

#include <sqlite3.h>

#include <cmath>

#include "storage/schema_sql.h"
#include "storage/sql_row.h"

namespace fs = std::filesystem;

namespace stallwatch::storage {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Each entry takes the DB from version-1 to version. Append; never edit a shipped one.
const Migration kMigrations[] = {
    {1, kSchemaV1Sql},   {2, kSchemaV2Sql},   {3, kSchemaV3Sql},   {4, kSchemaV4Sql},
    {5, kSchemaV5Sql},   {6, kSchemaV6Sql},   {7, kSchemaV7Sql},   {8, kSchemaV8Sql},
    {9, kSchemaV9Sql},   {10, kSchemaV10Sql}, {11, kSchemaV11Sql}, {12, kSchemaV12Sql},
    {13, kSchemaV13Sql}, {14, kSchemaV14Sql},
};

}  // namespace

int Store::schemaVersion() { return db_.execAndGet("PRAGMA user_version").getInt(); }

void Store::migrate() {
  const int current = schemaVersion();
  if (current > kSchemaVersion) {
    throw StoreError("the database has schema version " + std::to_string(current) +
                     ", newer than this stallwatch understands (" + std::to_string(kSchemaVersion) +
                     "); use a newer stallwatch");
  }
  // Schema 13 edits a CHECK's text in sqlite_schema, which a connection in defensive mode may
  // not (a build of SQLite that turns it on by default; Debian's does not).
  if (current < 13) sqlite3_db_config(db_.getHandle(), SQLITE_DBCONFIG_DEFENSIVE, 0, nullptr);
  for (const Migration& m : kMigrations) {
    if (m.version <= current) continue;
    SQLite::Transaction tx(db_);
    db_.exec(m.sql);
    db_.exec("PRAGMA user_version = " + std::to_string(m.version));
    tx.commit();
  }
}

int64_t Store::beginRun(const RunInfo& run) {
  SQLite::Statement st(db_,
                       "INSERT INTO runs (started_ms, hostname, version, interval_ms, collectors) "
                       "VALUES (?,?,?,?,?)");
  st.bind(1, run.started_ms);
  st.bind(2, run.hostname);
  st.bind(3, run.version);
  st.bind(4, run.interval_ms);
  st.bind(5, run.collectors);
  st.exec();
  return db_.getLastInsertRowid();
}

void Store::endRun(int64_t run_id, int64_t ended_ms, uint64_t dropped_batches) {
  SQLite::Transaction tx(db_);
  SQLite::Statement st(db_, "UPDATE runs SET ended_ms = ?, dropped_batches = ? WHERE run_id = ?");
  st.bind(1, ended_ms);
  st.bind(2, static_cast<int64_t>(dropped_batches));
  st.bind(3, run_id);
  st.exec();
  SQLite::Statement touch(db_, "UPDATE block_devices SET last_seen_ms = ? WHERE device_id = ?");
  for (const auto& [key, id] : device_ids_) {
    touch.bind(1, ended_ms);
    touch.bind(2, id);
    touch.exec();
    touch.reset();
  }
  tx.commit();
}

int64_t Store::deviceId(const std::string& name, uint32_t major, uint32_t minor, int64_t seen_ms) {
  auto key = std::make_tuple(name, major, minor);
  if (auto it = device_ids_.find(key); it != device_ids_.end()) return it->second;
  SQLite::Statement st(
      db_,
      "INSERT INTO block_devices (name, major, minor, first_seen_ms, last_seen_ms) "
      "VALUES (?,?,?,?,?) ON CONFLICT (name, major, minor) DO UPDATE SET "
      "last_seen_ms = excluded.last_seen_ms RETURNING device_id");
  st.bind(1, name);
  st.bind(2, static_cast<int64_t>(major));
  st.bind(3, static_cast<int64_t>(minor));
  st.bind(4, seen_ms);
  st.bind(5, seen_ms);
  st.executeStep();
  const int64_t id = st.getColumn(0).getInt64();
  device_ids_.emplace(std::move(key), id);
  return id;
}

void Store::upsertDevices(const collectors::DeviceTree& tree, int64_t seen_ms) {
  SQLite::Transaction tx(db_);
  SQLite::Statement st(
      db_,
      "UPDATE block_devices SET kind=?, parent=?, slaves=?, dm_name=?, backing_file=?, "
      "backing_device=?, physical=?, model=?, serial=?, wwn=?, transport=?, rotational=?, "
      "size_bytes=?, last_seen_ms=?, served_by=? WHERE device_id=?");
  SQLite::Statement mount(
      db_,
      "INSERT INTO mounts (device_id, mount_point, fs_type, source, first_seen_ms, last_seen_ms) "
      "VALUES (?,?,?,?,?,?) ON CONFLICT (device_id, mount_point) DO UPDATE SET "
      "fs_type=excluded.fs_type, source=excluded.source, last_seen_ms=excluded.last_seen_ms");
  for (const auto& d : tree.devices) {
    if (!d.major || !d.minor) continue;  // without a device number it cannot be matched
    const int64_t id = deviceId(d.name, *d.major, *d.minor, seen_ms);
    st.bind(1, collectors::toString(d.kind));
    bindTextOrNull(st, 2, d.parent);
    bindTextOrNull(st, 3, joinList(d.slaves));
    bindTextOrNull(st, 4, d.dm_name);
    bindTextOrNull(st, 5, d.backing_file);
    bindTextOrNull(st, 6, d.backing_device);
    bindTextOrNull(st, 7, joinList(tree.physicalDevices(d.name)));
    bindTextOrNull(st, 8, d.identity.model);
    bindTextOrNull(st, 9, d.identity.serial);
    bindTextOrNull(st, 10, d.identity.wwn);
    bindTextOrNull(st, 11, d.identity.transport);
    if (d.identity.rotational) {
      st.bind(12, *d.identity.rotational ? 1 : 0);
    } else {
      st.bind(12);
    }
    bindOptional(st, 13, d.identity.size_bytes);
    st.bind(14, seen_ms);
    bindTextOrNull(st, 15, d.served_by);
    st.bind(16, id);
    st.exec();
    st.reset();
    for (const auto& m : d.mounts) {
      mount.bind(1, id);
      mount.bind(2, m.mount_point);
      mount.bind(3, m.fs_type);
      mount.bind(4, m.source);
      mount.bind(5, seen_ms);
      mount.bind(6, seen_ms);
      mount.exec();
      mount.reset();
    }
  }
  tx.commit();
}

int64_t Store::gpuId(uint32_t index, const std::string& uuid, int64_t seen_ms) {
  const std::string key = uuid.empty() ? "index:" + std::to_string(index) : uuid;
  if (auto it = gpu_ids_.find(key); it != gpu_ids_.end()) return it->second;
  SQLite::Statement st(db_,
                       "INSERT INTO gpus (uuid, gpu_index, first_seen_ms, last_seen_ms) "
                       "VALUES (?,?,?,?) ON CONFLICT (uuid) DO UPDATE SET "
                       "gpu_index = excluded.gpu_index, last_seen_ms = excluded.last_seen_ms "
                       "RETURNING gpu_id");
  st.bind(1, key);
  st.bind(2, static_cast<int64_t>(index));
  st.bind(3, seen_ms);
  st.bind(4, seen_ms);
  st.executeStep();
  const int64_t id = st.getColumn(0).getInt64();
  gpu_ids_.emplace(key, id);
  return id;
}

void Store::writeNfsSample(int64_t ts_ms, int64_t device_id, const collectors::NfsRates& n) {
  auto& st = *insert_nfs_;
  st.bind(":ts_ms", ts_ms);
  st.bind(":device_id", device_id);
  bindOptional(st, ":read_rtt_ms", n.read_rtt_ms);
  bindOptional(st, ":write_rtt_ms", n.write_rtt_ms);
  st.bind(":metadata_ops_per_second", n.metadata_ops_per_second);
  bindOptional(st, ":metadata_await_ms", n.metadata_await_ms);
  st.bind(":retransmissions_per_second", n.retransmissions_per_second);
  st.bind(":timeouts_per_second", n.timeouts_per_second);
  st.exec();
  st.reset();
}

void Store::writeGpuDescriptions(const std::vector<collectors::GpuInfo>& gpus, int64_t seen_ms) {
  SQLite::Statement st(db_,
                       "UPDATE gpus SET name = :name, memory_total_bytes = :memory_total_bytes "
                       "WHERE gpu_id = :gpu_id");
  for (const auto& g : gpus) {
    const int64_t id = gpuId(g.index, g.uuid, seen_ms);
    bindTextOrNull(st, ":name", g.name);
    bindOptional(st, ":memory_total_bytes", g.memory_total_bytes);
    st.bind(":gpu_id", id);
    st.exec();
    st.reset();
  }
}

void Store::writeBatches(const std::vector<collectors::SampleBatch>& batches) {
  try {
    writeBatchesInTransaction(batches);
  } catch (...) {
    // A statement that failed mid-step keeps its read open and every later COMMIT fails
    // ("SQL statements in progress"); ids cached from the rolled-back transaction do not
    // exist. Found by tests/test_faults_e2e.py: after a locked DB, nothing was written again.
    for (auto* st : {insert_disk_.get(), insert_nfs_.get(), insert_pressure_.get(),
                     insert_cpu_.get(), insert_gpu_.get(), insert_gpu_process_.get(),
                     touch_device_.get(), insert_job_sample_.get(), insert_rank_sample_.get()}) {
      if (st) st->tryReset();
    }
    device_ids_.clear();
    gpu_ids_.clear();
    job_ids_.clear();
    cgroup_limits_written_.clear();  // rolled back with the rest: write them again
    throw;
  }
}

void Store::writeBatchesInTransaction(const std::vector<collectors::SampleBatch>& batches) {
  SQLite::Transaction tx(db_);
  for (const auto& b : batches) {
    if (!b.gpu_updates.empty()) writeGpuDescriptions(b.gpu_updates, b.wall_time_ms);
    const int64_t interval_ms = static_cast<int64_t>(std::llround(b.interval_seconds * 1000.0));
    for (const auto& d : b.disks) {
      auto& st = *insert_disk_;
      const auto& r = d.rates;
      st.bind(":ts_ms", b.wall_time_ms);
      const int64_t device_id = deviceId(d.device, d.major, d.minor, b.wall_time_ms);
      st.bind(":device_id", device_id);
      st.bind(":interval_ms", interval_ms);
      st.bind(":reads_per_second", r.reads_per_second);
      st.bind(":writes_per_second", r.writes_per_second);
      st.bind(":read_bytes_per_second", r.read_bytes_per_second);
      st.bind(":write_bytes_per_second", r.write_bytes_per_second);
      bindOptional(st, ":r_await_ms", r.r_await_ms);
      bindOptional(st, ":w_await_ms", r.w_await_ms);
      bindOptional(st, ":discards_per_second", r.discards_per_second);
      bindOptional(st, ":d_await_ms", r.d_await_ms);
      bindOptional(st, ":flushes_per_second", r.flushes_per_second);
      bindOptional(st, ":f_await_ms", r.f_await_ms);
      st.bind(":aqu_sz", r.aqu_sz);
      st.bind(":util_percent", r.util_percent);
      st.bind(":in_flight", static_cast<int64_t>(d.in_flight));
      st.exec();
      st.reset();
      if (d.nfs) writeNfsSample(b.wall_time_ms, device_id, *d.nfs);
    }
    for (const auto& p : b.pressure) {
      auto& st = *insert_pressure_;
      st.bind(":ts_ms", b.wall_time_ms);
      st.bind(":interval_ms", interval_ms);
      st.bind(":resource", p.resource);
      bindOptional(st, ":some_ratio", p.some_ratio);
      bindOptional(st, ":full_ratio", p.full_ratio);
      st.exec();
      st.reset();
    }
    if (b.cpu) {
      auto& st = *insert_cpu_;
      st.bind(":ts_ms", b.wall_time_ms);
      st.bind(":interval_ms", interval_ms);
      st.bind(":busy_cores", b.cpu->busy_cores);
      bindOptional(st, ":iowait_cores", b.cpu->iowait_cores);
      st.bind(":online_cpus", static_cast<int64_t>(b.cpu->online_cpus));
      st.exec();
      st.reset();
    }
    for (const auto& g : b.gpus) {
      auto& st = *insert_gpu_;
      st.bind(":ts_ms", b.wall_time_ms);
      st.bind(":gpu_id", gpuId(g.gpu_index, g.uuid, b.wall_time_ms));
      st.bind(":interval_ms", interval_ms);
      bindOptional(st, ":utilization_percent", g.utilization_percent);
      st.bind(":utilization_sample_count", static_cast<int64_t>(g.utilization_sample_count));
      bindOptional(st, ":memory_utilization_percent", g.memory_utilization_percent);
      bindOptional(st, ":memory_used_bytes", g.memory_used_bytes);
      bindOptional(st, ":sm_clock_mhz", g.sm_clock_mhz);
      bindOptional(st, ":pcie_tx_bytes_per_second", g.pcie_tx_bytes_per_second);
      bindOptional(st, ":pcie_rx_bytes_per_second", g.pcie_rx_bytes_per_second);
      bindOptional(st, ":power_watts", g.power_watts);
      bindOptional(st, ":sm_active_percent", g.sm_active_percent);
      bindOptional(st, ":sm_occupancy_percent", g.sm_occupancy_percent);
      bindOptional(st, ":tensor_active_percent", g.tensor_active_percent);
      bindOptional(st, ":dram_active_percent", g.dram_active_percent);
      st.exec();
      st.reset();
    }
    writeJobFacts(b);
    // After the jobs' facts: a job that started this interval has its id.
    for (const auto& l : b.io_latency) {
      auto& st = *insert_io_latency_;
      st.bind(":ts_ms", b.wall_time_ms);
      st.bind(":device_id", deviceId(l.device, l.major, l.minor, b.wall_time_ms));
      st.bind(":interval_ms", interval_ms);
      st.bind(":op", l.op);
      if (l.job_key.empty()) {
        st.bind(":job_id");
      } else {
        st.bind(":job_id", jobId(l.job_key));
      }
      st.bind(":count", static_cast<int64_t>(l.count));
      st.bind(":mean_ms", l.mean_ms);
      st.bind(":service_mean_ms", l.service_mean_ms);
      bindOptional(st, ":p50_ms", l.p50_ms);
      bindOptional(st, ":p99_ms", l.p99_ms);
      bindOptional(st, ":p999_ms", l.p999_ms);
      st.bind(":slots", l.slots);
      st.exec();
      st.reset();
    }
    for (const auto& p : b.gpu_processes) {
      auto& st = *insert_gpu_process_;
      st.bind(":ts_ms", b.wall_time_ms);
      st.bind(":gpu_id", gpuId(p.gpu_index, p.uuid, b.wall_time_ms));
      st.bind(":pid", static_cast<int64_t>(p.pid));
      bindOptional(st, ":sm_utilization_percent", p.sm_utilization_percent);
      bindOptional(st, ":memory_utilization_percent", p.memory_utilization_percent);
      st.exec();
      st.reset();
    }
  }
  tx.commit();
}

uint64_t Store::pruneBefore(int64_t cutoff_ms) {
  // Rows are appended in time order, so the oldest are the lowest rowids: each chunk reads
  // from the front of the table instead of scanning it for old timestamps.
  static const char* kTables[][2] = {
      {"disk_samples", "ts_ms"}, {"pressure_samples", "ts_ms"},    {"cpu_samples", "ts_ms"},
      {"gpu_samples", "ts_ms"},  {"gpu_process_samples", "ts_ms"}, {"job_samples", "ts_ms"},
      {"rank_samples", "ts_ms"}, {"agent_events", "ts_ms"},        {"incident_events", "ts_ms"},
      {"drive_health", "ts_ms"}, {"incidents", "end_ms"},          {"io_latency_samples", "ts_ms"},
  };
  constexpr int kChunk = 20000;
  uint64_t deleted = 0;
  for (const auto& [table, column] : kTables) {
    const std::string sql =
        std::string("DELETE FROM ") + table + " WHERE rowid IN (SELECT rowid FROM " + table +
        " ORDER BY rowid LIMIT " + std::to_string(kChunk) + ") AND " + column + " < ?";
    SQLite::Statement st(db_, sql);
    while (true) {
      st.bind(1, cutoff_ms);
      const int n = st.exec();
      st.reset();
      deleted += static_cast<uint64_t>(n);
      if (n < kChunk) break;
    }
  }
  return deleted;
}

const char* migrationSql(int version) {
  for (const Migration& m : kMigrations) {
    if (m.version == version) return m.sql;
  }
  return nullptr;
}

}  // namespace stallwatch::storage
