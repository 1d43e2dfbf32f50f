#include <fcntl.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <system_error>

#include "storage/sql_row.h"
#include "storage/store.h"

// The database file's life: made with the right modes, checked before it is trusted, opened
// with its statements prepared, moved aside when damaged, shared with a group; and where it
// lives by default. What is written into it is store.cpp's.

namespace fs = std::filesystem;

namespace stallwatch::storage {
namespace {

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
