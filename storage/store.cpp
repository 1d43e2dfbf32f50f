#include "storage/store.h"

#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <system_error>

#include "health/reading_json.h"
#include "storage/incident_store.h"
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

// Creates the parent directory (0750) and the DB file (0600) so that SQLite, which creates
// files 0644 less the umask, never leaves the history readable by everyone. WAL and SHM
// files take the DB file's mode.
void prepareFile(const fs::path& path) {
  std::error_code ec;
  const fs::path parent = path.parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) {
      throw StoreError("cannot create directory " + parent.string() + ": " + ec.message());
    }
    fs::permissions(parent, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec,
                    ec);
  }
  // The DB is opened with the intent stated: never through a symbolic link (a link planted
  // where the DB goes would have a database written into its target), never a FIFO or a device
  // (opening a FIFO blocks until a writer comes, deaf to signals).
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      throw StoreError(path.string() +
                       " is a symbolic link: the database is not written through links; give "
                       "the path of the file itself");
    }
    if (!S_ISREG(st.st_mode)) {
      throw StoreError(path.string() +
                       " is not a regular file (a FIFO, a device or a folder): refused as the "
                       "database");
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw StoreError("cannot open " + path.string() + ": " + std::strerror(errno));
  }
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  // An empty file made by someone else's hand (touch, mktemp) is made owner-only before any
  // history goes into it.
  if (regular && st.st_size == 0 && (st.st_mode & 077) != 0) ::fchmod(fd, 0600);
  ::close(fd);
  if (!regular) throw StoreError(path.string() + " is not a regular file: refused as the database");
}

// SQLite's header says how many pages the database has (bytes 28..31, valid when the change
// counter at 24 matches "version-valid-for" at 92); a file shorter than that was truncated.
void checkNotTruncated(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  unsigned char h[100];
  const ssize_t n = ::pread(fd, h, sizeof h, 0);
  struct stat st {};
  const bool have_size = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof h) || !have_size ||
      std::memcmp(h, "SQLite format 3", 16) != 0)
    return;
  auto be32 = [&](int at) {
    return static_cast<uint32_t>(h[at]) << 24 | static_cast<uint32_t>(h[at + 1]) << 16 |
           static_cast<uint32_t>(h[at + 2]) << 8 | h[at + 3];
  };
  const uint32_t page_size = h[16] << 8 | h[17];
  const uint64_t pages = be32(28);
  const uint64_t real_page_size = page_size == 1 ? 65536 : page_size;
  if (be32(24) == be32(92) && pages > 0 &&
      static_cast<uint64_t>(st.st_size) < pages * real_page_size) {
    throw CorruptDatabase(path.string() + " is truncated: " + std::to_string(st.st_size) +
                          " bytes, its header says " + std::to_string(pages * real_page_size));
  }
}

// Whether PATH begins with SQLite's header (or is empty: a database yet to be written).
bool beginsAsSqlite(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return true;  // gone or unreadable: not this check's to say
  char h[16] = {};
  const ssize_t n = ::pread(fd, h, sizeof h, 0);
  ::close(fd);
  return n == 0 ||
         (n == static_cast<ssize_t>(sizeof h) && std::memcmp(h, "SQLite format 3", 16) == 0);
}

// SQLite counts every allocation for sqlite3_memory_used() (nothing here asks) under a mutex of
// its own: a lock and an unlock around each of the writer's mallocs, 4 % of its instructions
// (issue 47). Said before SQLite's first use in the process; later it is refused, harmlessly.
bool withoutMemoryStatistics() {
  static const bool off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  return off;
}

}  // namespace

Store::Store(const fs::path& path, int busy_timeout_ms)
    // URIs on: an export ATTACHes a recording on a read-only mount as one (readOnlyMountUri).
    // The DB's own name is a plain path, never read as a URI (it does not start with "file:").
    // No mutex of SQLite's around each call: a Store is used by one thread at a time (the
    // recorder's writer thread, then the one that finishes it), and the locking was 7 % of the
    // writer's instructions (issue 47).
    : db_(path.is_absolute() || path.string().rfind("file:", 0) != 0 ? path.string()
                                                                     : "./" + path.string(),
          SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE | SQLite::OPEN_URI | SQLite::OPEN_NOMUTEX,
          busy_timeout_ms) {}

Store::~Store() = default;

std::unique_ptr<Store> Store::open(const fs::path& path, int busy_timeout_ms) {
  withoutMemoryStatistics();
  prepareFile(path);
  checkNotTruncated(path);
  std::unique_ptr<Store> store;
  try {
    store.reset(new Store(path, busy_timeout_ms));
    // The first real read is where SQLite notices a file that is not a database.
    store->db_.exec("PRAGMA journal_mode=WAL");
    store->db_.exec("PRAGMA synchronous=NORMAL");
    store->migrate();
  } catch (const SQLite::Exception& e) {
    const int code = e.getErrorCode() & 0xFF;
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) {
      throw CorruptDatabase(path.string() + " is not a usable stallwatch database: " + e.what());
    }
    throw StoreError(path.string() + " is not a usable stallwatch database: " + e.what());
  }
  auto& db = store->db_;
  try {
    store->insert_disk_ = std::make_unique<NamedStatement>(
        db, insertSql("disk_samples",
                      "ts_ms, device_id, interval_ms, reads_per_second, writes_per_second, "
                      "read_bytes_per_second, write_bytes_per_second, r_await_ms, w_await_ms, "
                      "discards_per_second, d_await_ms, flushes_per_second, f_await_ms, aqu_sz, "
                      "util_percent, in_flight"));
    store->insert_nfs_ = std::make_unique<NamedStatement>(
        db, insertSql("nfs_samples",
                      "ts_ms, device_id, read_rtt_ms, write_rtt_ms, metadata_ops_per_second, "
                      "metadata_await_ms, retransmissions_per_second, timeouts_per_second"));
    store->insert_pressure_ = std::make_unique<NamedStatement>(
        db, insertSql("pressure_samples", "ts_ms, interval_ms, resource, some_ratio, full_ratio"));
    store->insert_io_latency_ = std::make_unique<NamedStatement>(
        db, insertSql("io_latency_samples",
                      "ts_ms, device_id, interval_ms, op, job_id, count, mean_ms, service_mean_ms, "
                      "p50_ms, p99_ms, p999_ms, slots"));
    store->insert_cpu_ = std::make_unique<NamedStatement>(
        db, insertSql("cpu_samples", "ts_ms, interval_ms, busy_cores, iowait_cores, online_cpus"));
    store->insert_gpu_ = std::make_unique<NamedStatement>(
        db,
        insertSql(
            "gpu_samples",
            "ts_ms, gpu_id, interval_ms, utilization_percent, utilization_sample_count, "
            "memory_utilization_percent, memory_used_bytes, sm_clock_mhz, "
            "pcie_tx_bytes_per_second, pcie_rx_bytes_per_second, power_watts, sm_active_percent, "
            "sm_occupancy_percent, tensor_active_percent, dram_active_percent"));
    store->insert_gpu_process_ = std::make_unique<NamedStatement>(
        db, insertSql("gpu_process_samples",
                      "ts_ms, gpu_id, pid, sm_utilization_percent, memory_utilization_percent"));
    store->insert_job_sample_ = std::make_unique<NamedStatement>(
        db, insertSql(
                "job_samples",
                "ts_ms, job_id, interval_ms, processes, workers, read_bytes_per_second, "
                "write_bytes_per_second, rchar_per_second, read_syscalls_per_second, "
                "main_cpu_ratio, workers_cpu_ratio, d_state_threads, top_wchan, steps, samples, "
                "data_wait_seconds, step_seconds, gpu_util_percent, gpu_work_percent, "
                "cgroup_io_some, cgroup_cpu_some, cgroup_memory_some, cgroup_cpu_throttled_ratio, "
                "cgroup_limited_read_bytes_per_second, cgroup_read_limit_bytes_per_second, "
                "cgroup_limits, neighbour_io, sleep_wchan, main_thread_cpu_ratio, "
                "main_thread_runqueue_ratio, stopped_processes, workers_sleep_wchan, cpus_allowed, "
                "cgroup_read_limit, main_thread_loader_wait_ratio, main_thread_futex_wait_ratio, "
                "pin_memory"));
    store->insert_rank_sample_ = std::make_unique<NamedStatement>(
        db,
        insertSql("rank_samples",
                  "ts_ms, job_id, rank, interval_ms, processes, workers, read_bytes_per_second, "
                  "write_bytes_per_second, main_cpu_ratio, workers_cpu_ratio, d_state_threads, "
                  "top_wchan, "
                  "steps, data_wait_seconds, step_seconds, gpu_util_percent, gpu_work_percent, "
                  "main_thread_cpu_ratio, main_thread_runqueue_ratio, stopped_processes, "
                  "cgroup_limited_read_bytes_per_second, cgroup_read_limit_bytes_per_second, "
                  "cgroup_cpu_throttled_ratio, cgroup_io_some, main_thread_loader_wait_ratio, "
                  "main_thread_futex_wait_ratio, pin_memory"));
  } catch (const SQLite::Exception& e) {
    // Of this schema's version, yet a table or column missing (dropped by hand, a partial
    // restore): damaged, as a corrupt file is, so moved aside rather than failed on forever.
    throw CorruptDatabase(path.string() + " is missing part of its schema (" + e.what() + ")");
  }
  return store;
}

namespace {

// PRAGMA quick_check, given at most BUDGET: damage inside the file (a page overwritten, not
// only a broken header) would otherwise be appended to for days. On a large DB the check is
// cut short (a progress handler) and the file taken as it is.
void quickCheck(SQLite::Database& db, const fs::path& path, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  static thread_local std::chrono::steady_clock::time_point t_deadline;
  t_deadline = deadline;
  sqlite3_progress_handler(
      db.getHandle(), 10000,
      [](void*) { return std::chrono::steady_clock::now() > t_deadline ? 1 : 0; }, nullptr);
  std::string result;
  try {
    result = db.execAndGet("PRAGMA quick_check").getString();
  } catch (const SQLite::Exception& e) {
    sqlite3_progress_handler(db.getHandle(), 0, nullptr, nullptr);
    const int code = e.getErrorCode() & 0xFF;
    if (code == SQLITE_INTERRUPT) return;  // out of time: not judged
    if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
      throw CorruptDatabase(path.string() + " is corrupt: " + e.what());
    }
    throw;
  }
  sqlite3_progress_handler(db.getHandle(), 0, nullptr, nullptr);
  if (result != "ok")
    throw CorruptDatabase(path.string() + " is corrupt (quick_check: " + result.substr(0, 200) +
                          ")");
}

}  // namespace

std::string Store::moveAside(const fs::path& path, const std::string& why) {
  const time_t now = ::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const fs::path aside = path.string() + ".corrupt-" + stamp;
  std::error_code ec;
  fs::rename(path, aside, ec);
  if (ec) throw StoreError(why + "; and it cannot be moved aside: " + ec.message());
  for (const char* suffix : {"-wal", "-shm"}) {
    const fs::path side = path.string() + suffix;
    if (fs::exists(side, ec)) fs::rename(side, aside.string() + suffix, ec);
  }
  return aside.string();
}

bool Store::isCorruption(const std::exception& e) {
  if (dynamic_cast<const CorruptDatabase*>(&e)) return true;
  if (const auto* sql = dynamic_cast<const SQLite::Exception*>(&e)) {
    const int code = sql->getErrorCode() & 0xFF;
    return code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
  }
  return false;
}

std::unique_ptr<Store> Store::openOrMoveAside(const fs::path& path, std::string* moved_to,
                                              int busy_timeout_ms) {
  try {
    auto store = open(path, busy_timeout_ms);
    quickCheck(store->db_, path, std::chrono::seconds(5));
    return store;
  } catch (const CorruptDatabase& e) {
    // A file that was never a database (a config file named by mistake) is the operator's, not
    // a damaged recording: said and left as it is (issue 46: `--db stallwatch.conf` moved the
    // file aside and put a database in its place).
    if (!beginsAsSqlite(path))
      throw StoreError(
          path.string() +
          " is not a SQLite database (it does not begin with SQLite's header): left as "
          "it is; name another --db, or move the file away");
    const std::string aside = moveAside(path, e.what());
    if (moved_to) *moved_to = aside + " (" + e.what() + ")";
    return open(path, busy_timeout_ms);
  }
}

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

std::string shareWithGroup(const fs::path& path, gid_t gid) {
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  auto share = [&](const fs::path& p, mode_t mode) -> std::string {
    if (::chown(p.c_str(), static_cast<uid_t>(-1), gid) != 0 || ::chmod(p.c_str(), mode) != 0)
      return p.string() + ": " + std::strerror(errno);
    return {};
  };
  if (std::string why = share(dir, 0750); !why.empty()) return why;
  if (std::string why = share(path, 0640); !why.empty()) return why;
  for (const char* suffix : {"-wal", "-shm"}) {
    const fs::path p = path.string() + suffix;
    std::error_code ec;
    if (fs::exists(p, ec)) {
      if (std::string why = share(p, 0640); !why.empty()) return why;
    }
  }
  return {};
}

fs::path defaultReadingPath() {
  struct stat st {};
  // Unreadable counts as there (EACCES): the reader then says why it cannot open it.
  if (::stat(kServiceDatabase, &st) == 0 || errno == EACCES) return kServiceDatabase;
  return defaultDatabasePath();
}

fs::path defaultDatabasePath() {
  if (::geteuid() == 0) return "/var/lib/stallwatch/stallwatch.db";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    return fs::path(state) / "stallwatch" / "stallwatch.db";
  }
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    if (const passwd* pw = ::getpwuid(::geteuid())) home = pw->pw_dir;
  }
  return fs::path(home ? home : ".") / ".local" / "state" / "stallwatch" / "stallwatch.db";
}

}  // namespace stallwatch::storage
