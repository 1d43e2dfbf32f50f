// Recording::replay: the recording turned back into the batches the agent produced, tick by
// tick, so that the live path (correlator, hooks, webhook, metrics) can be driven by a real run
// after the fact: `stallwatch replay`, the live tests, and soaks over days of fast-forwarded
// samples.
//
// What comes back is what the DB keeps: per-interval disk, pressure, GPU, job and rank
// figures, job descriptions at their start and end, and each job's device and rank facts at
// the tick they were first seen. Counters are not stored, so the batches carry rates, as the
// collectors emit. Each table is read once, in time order, by a cursor; columns by name.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/recording.h"
#include "storage/sql_row.h"

namespace stallwatch::storage {
namespace {

// One table's rows in time order (column ts_ms), consumed tick by tick.
class Cursor {
 public:
  Cursor(SQLite::Database& db, const std::string& sql)
      : st_(db, sql), ts_(st_.getColumnIndex("ts_ms")) {
    step();
  }
  bool at(int64_t ts) const { return has_row_ && st_.getColumn(ts_).getInt64() == ts; }
  std::optional<int64_t> next() const {
    return has_row_ ? std::optional<int64_t>(st_.getColumn(ts_).getInt64()) : std::nullopt;
  }
  void step() { has_row_ = st_.executeStep(); }

  // The current row's column NAME. Names are looked up once per call site: the same literal
  // is the same pointer, so the cache is a few pointer comparisons per column.
  SQLite::Column column(const char* name) { return st_.getColumn(indexOf(name)); }
  // Whether the recording's schema has column NAME (SELECT * of an older one lacks it).
  bool has(const char* name) { return indexOf(name) >= 0; }
  double real(const char* name) { return column(name).getDouble(); }
  int64_t int64(const char* name) { return column(name).getInt64(); }
  std::string text(const char* name) {
    const auto c = column(name);
    return c.isNull() ? std::string() : c.getString();
  }
  std::optional<double> optionalReal(const char* name) {
    return storage::optionalReal(column(name));
  }
  template <typename T>
  std::optional<T> optionalInt(const char* name) {
    const auto c = column(name);
    return c.isNull() ? std::nullopt : std::optional<T>(static_cast<T>(c.getInt64()));
  }

 private:
  SQLite::Statement st_;
  int ts_;
  bool has_row_ = false;
  std::vector<std::pair<const char*, int>> indices_;  // -1: no such column

  int indexOf(const char* name) {
    for (const auto& [n, i] : indices_) {
      if (n == name) return i;
    }
    int i = -1;
    try {
      i = st_.getColumnIndex(name);
    } catch (const SQLite::Exception&) {
    }
    indices_.emplace_back(name, i);
    return i;
  }
};

collectors::DiskSample diskRow(Cursor& r) {
  collectors::DiskSample d;
  d.device = r.text("name");
  d.major = static_cast<uint32_t>(r.int64("major"));
  d.minor = static_cast<uint32_t>(r.int64("minor"));
  d.rates.reads_per_second = r.real("reads_per_second");
  d.rates.writes_per_second = r.real("writes_per_second");
  d.rates.read_bytes_per_second = r.real("read_bytes_per_second");
  d.rates.write_bytes_per_second = r.real("write_bytes_per_second");
  d.rates.r_await_ms = r.optionalReal("r_await_ms");
  d.rates.w_await_ms = r.optionalReal("w_await_ms");
  d.rates.discards_per_second = r.optionalReal("discards_per_second");
  d.rates.d_await_ms = r.optionalReal("d_await_ms");
  d.rates.flushes_per_second = r.optionalReal("flushes_per_second");
  d.rates.f_await_ms = r.optionalReal("f_await_ms");
  d.rates.aqu_sz = r.real("aqu_sz");
  d.rates.util_percent = r.real("util_percent");
  d.in_flight = static_cast<uint64_t>(r.int64("in_flight"));
  return d;
}

collectors::PressureSample pressureRow(Cursor& r) {
  return {r.text("resource"), r.optionalReal("some_ratio"), r.optionalReal("full_ratio"), {}, {}};
}

collectors::CpuSample cpuRow(Cursor& r) {
  collectors::CpuSample c;
  c.busy_cores = r.real("busy_cores");
  c.iowait_cores = r.optionalReal("iowait_cores");
  c.online_cpus = static_cast<uint32_t>(r.int64("online_cpus"));
  return c;
}

collectors::GpuSample gpuRow(Cursor& r) {
  collectors::GpuSample g;
  g.gpu_index = static_cast<uint32_t>(r.int64("gpu_index"));
  g.uuid = r.text("uuid");
  g.utilization_percent = r.optionalReal("utilization_percent");
  g.utilization_sample_count = static_cast<uint32_t>(r.int64("utilization_sample_count"));
  g.memory_utilization_percent = r.optionalReal("memory_utilization_percent");
  g.memory_used_bytes = r.optionalInt<uint64_t>("memory_used_bytes");
  g.memory_total_bytes = r.optionalInt<uint64_t>("memory_total_bytes");
  g.sm_clock_mhz = r.optionalInt<uint32_t>("sm_clock_mhz");
  g.power_watts = r.optionalReal("power_watts");
  g.sm_active_percent = r.optionalReal("sm_active_percent");
  g.sm_occupancy_percent = r.optionalReal("sm_occupancy_percent");
  g.tensor_active_percent = r.optionalReal("tensor_active_percent");
  g.dram_active_percent = r.optionalReal("dram_active_percent");
  return g;
}

// A job row whose cgroup_limits is NULL: the wording in force is the last one written.
constexpr std::string_view kLimitsAsBefore = "\x01";

// The figures a job's and a rank's samples share.
template <typename Sample>
void processFigures(Cursor& r, Sample& s) {
  s.key = r.text("job_key");
  s.processes = static_cast<uint32_t>(r.int64("processes"));
  s.workers = static_cast<uint32_t>(r.int64("workers"));
  s.read_bytes_per_second = r.optionalReal("read_bytes_per_second");
  s.write_bytes_per_second = r.optionalReal("write_bytes_per_second");
  s.main_cpu_ratio = r.optionalReal("main_cpu_ratio");
  s.workers_cpu_ratio = r.optionalReal("workers_cpu_ratio");
  s.d_state_threads = static_cast<uint32_t>(r.int64("d_state_threads"));
  s.top_wchan = r.text("top_wchan");
  s.steps = r.optionalInt<uint64_t>("steps");
  s.data_wait_seconds = r.optionalReal("data_wait_seconds");
  s.step_seconds = r.optionalReal("step_seconds");
  s.gpu_util_percent = r.optionalReal("gpu_util_percent");
  s.gpu_work_percent = r.optionalReal("gpu_work_percent");
  if (r.has("main_thread_cpu_ratio")) {  // schema 11
    s.main_thread_cpu_ratio = r.optionalReal("main_thread_cpu_ratio");
    s.main_thread_runqueue_ratio = r.optionalReal("main_thread_runqueue_ratio");
    s.stopped_processes = r.optionalInt<uint32_t>("stopped_processes").value_or(0);
    s.main_thread_loader_wait_ratio = r.optionalReal("main_thread_loader_wait_ratio");
    s.main_thread_futex_wait_ratio = r.optionalReal("main_thread_futex_wait_ratio");
    s.pin_memory = r.optionalInt<int64_t>("pin_memory").value_or(0) != 0;
  }
  if (r.has("cgroup_limited_read_bytes_per_second")) {  // jobs: schema 8; ranks: schema 11
    s.cgroup_limited_read_bytes_per_second = r.optionalReal("cgroup_limited_read_bytes_per_second");
    s.cgroup_read_limit_bytes_per_second = r.optionalReal("cgroup_read_limit_bytes_per_second");
    s.cgroup_cpu_throttled_ratio = r.optionalReal("cgroup_cpu_throttled_ratio");
    s.cgroup_io_some = r.optionalReal("cgroup_io_some");
  }
}

collectors::JobSample jobRow(Cursor& r) {
  collectors::JobSample j;
  processFigures(r, j);
  for (auto& uuid : splitList(r.text("gpus"))) {
    if (!uuid.empty()) j.gpus.push_back(std::move(uuid));
  }
  j.rchar_per_second = r.optionalReal("rchar_per_second");
  j.read_syscalls_per_second = r.optionalReal("read_syscalls_per_second");
  j.samples = r.optionalInt<uint64_t>("samples");
  // The job's own cgroup (schema 8) and its neighbours (schema 9), where recorded. The limits'
  // wording is written only when it changes (NULL: as the row before): marked here, carried
  // forward by the replay loop.
  j.cgroup_limits = r.has("cgroup_limits") && !r.column("cgroup_limits").isNull()
                        ? r.text("cgroup_limits")
                        : std::string(kLimitsAsBefore);
  if (r.has("cgroup_io_some")) {
    j.cgroup_io_some = r.optionalReal("cgroup_io_some");
    j.cgroup_cpu_some = r.optionalReal("cgroup_cpu_some");
    j.cgroup_memory_some = r.optionalReal("cgroup_memory_some");
    j.cgroup_cpu_throttled_ratio = r.optionalReal("cgroup_cpu_throttled_ratio");
    j.cgroup_limited_read_bytes_per_second = r.optionalReal("cgroup_limited_read_bytes_per_second");
    j.cgroup_read_limit_bytes_per_second = r.optionalReal("cgroup_read_limit_bytes_per_second");
  }
  if (r.has("sleep_wchan")) j.sleep_wchan = r.text("sleep_wchan");
  if (r.has("workers_sleep_wchan")) {  // schema 11
    j.workers_sleep_wchan = r.text("workers_sleep_wchan");
    j.cpus_allowed = r.optionalReal("cpus_allowed");
    j.cgroup_read_limit = r.text("cgroup_read_limit");
  }
  if (r.has("neighbour_io") && !r.column("neighbour_io").isNull())
    j.neighbour_io = r.text("neighbour_io");
  return j;
}

collectors::RankSample rankRow(Cursor& r) {
  collectors::RankSample k;
  processFigures(r, k);
  k.rank = static_cast<int32_t>(r.int64("rank"));
  k.gpu = r.text("gpu");
  return k;
}

// A fact of the recording, at the tick it was first seen.
struct Fact {
  int64_t ts = 0;
  std::optional<collectors::JobDescription> job;
  std::optional<collectors::JobDeviceFact> device;
  std::optional<collectors::RankDescription> rank;
};

void addTo(collectors::SampleBatch& b, Fact& f) {
  if (f.job) b.job_updates.push_back(std::move(*f.job));
  if (f.device) b.job_devices.push_back(std::move(*f.device));
  if (f.rank) b.rank_updates.push_back(std::move(*f.rank));
}

// Job descriptions (at their start, and again at their end), device and rank facts; in time
// order, descriptions before the facts of the same tick (a fact needs its job).
std::vector<Fact> factsOf(SQLite::Database& db, const std::vector<JobRecord>& jobs,
                          bool has_ranks) {
  std::vector<Fact> facts;
  for (const auto& job : jobs) {
    collectors::JobDescription j;
    j.key = job.key;
    j.label = job.label;
    j.root_pid = static_cast<uint32_t>(job.root_pid);
    j.cmdline = job.cmdline;
    j.labels = job.labels;
    j.gpus = job.gpu_uuids;
    j.started_ms = job.started_ms;
    facts.push_back({j.started_ms, j, {}, {}});
    if (job.ended_ms) {
      j.ended_ms = job.ended_ms;
      facts.push_back({*j.ended_ms, j, {}, {}});
    }
  }
  SQLite::Statement d(db,
                      "SELECT jd.first_seen_ms, j.job_key, b.name, b.major, b.minor, jd.via, "
                      "jd.open_files_seen FROM job_devices jd JOIN jobs j USING (job_id) "
                      "JOIN block_devices b USING (device_id)");
  const Columns dc(d);
  while (d.executeStep()) {
    collectors::JobDeviceFact f;
    f.key = dc.text("job_key");
    f.device = dc.text("name");
    f.major = static_cast<uint32_t>(dc.int64("major"));
    f.minor = static_cast<uint32_t>(dc.int64("minor"));
    f.via = dc.text("via");
    f.open_files = static_cast<uint32_t>(dc.int64("open_files_seen"));
    facts.push_back({dc.int64("first_seen_ms"), {}, f, {}});
  }
  if (has_ranks) {
    SQLite::Statement r(
        db,
        "SELECT r.first_seen_ms, j.job_key, r.rank, r.pid, coalesce(r.gpu_uuid, '') AS gpu "
        "FROM job_ranks r JOIN jobs j USING (job_id)");
    const Columns rc(r);
    while (r.executeStep()) {
      collectors::RankDescription rank;
      rank.key = rc.text("job_key");
      rank.rank = static_cast<int32_t>(rc.int64("rank"));
      rank.pid = static_cast<uint32_t>(rc.int64("pid"));
      rank.gpu = rc.text("gpu");
      facts.push_back({rc.int64("first_seen_ms"), {}, {}, rank});
    }
  }
  std::stable_sort(facts.begin(), facts.end(), [](const Fact& a, const Fact& b) {
    return std::make_pair(a.ts, !a.job) < std::make_pair(b.ts, !b.job);
  });
  return facts;
}

}  // namespace

ReplayStats Recording::replay(const std::function<bool(collectors::SampleBatch&)>& fn) {
  // Replay reads each table once in time order: SQLite sorts them, and its sorter may use up
  // to the page cache in memory. A small cache keeps a week's replay within a few MB (the
  // sort spills to a temporary file instead).
  db_.exec("PRAGMA cache_size = -8192");
  const bool has_jobs = version_ >= 2;
  const bool has_job_gpu_util = version_ >= 3;
  const bool has_ranks = version_ >= 6;  // ranks, GPU activity and power

  Cursor disks(db_,
               "SELECT s.*, d.name, d.major, d.minor FROM disk_samples s JOIN block_devices d "
               "USING (device_id) "
               "ORDER BY s.ts_ms");
  Cursor pressure(db_, "SELECT * FROM pressure_samples ORDER BY ts_ms");
  std::unique_ptr<Cursor> cpu;
  if (version_ >= 11)
    cpu = std::make_unique<Cursor>(db_, "SELECT * FROM cpu_samples ORDER BY ts_ms");
  Cursor gpus(
      db_,
      std::string("SELECT s.ts_ms, s.interval_ms, g.gpu_index, g.uuid, s.utilization_percent, "
                  "s.utilization_sample_count, s.memory_utilization_percent, s.memory_used_bytes, "
                  "g.memory_total_bytes, s.sm_clock_mhz, ") +
          (has_ranks
               ? "s.power_watts, s.sm_active_percent, s.sm_occupancy_percent, "
                 "s.tensor_active_percent, s.dram_active_percent"
               : "NULL AS power_watts, NULL AS sm_active_percent, NULL AS sm_occupancy_percent, "
                 "NULL AS tensor_active_percent, NULL AS dram_active_percent") +
          " FROM gpu_samples s JOIN gpus g USING (gpu_id) ORDER BY s.ts_ms");
  std::unique_ptr<Cursor> jobs, ranks;
  std::vector<Fact> facts;
  if (has_jobs) {
    jobs = std::make_unique<Cursor>(
        db_, std::string("SELECT s.*, j.job_key, j.gpus") +
                 (has_job_gpu_util ? "" : ", NULL AS gpu_util_percent") +
                 (has_ranks ? "" : ", NULL AS gpu_work_percent") +
                 " FROM job_samples s JOIN jobs j USING (job_id) ORDER BY s.ts_ms");
    facts = factsOf(db_, Recording::jobs(), has_ranks);
  }
  if (has_ranks) {
    ranks = std::make_unique<Cursor>(db_,
                                     "SELECT s.*, j.job_key, r.gpu_uuid AS gpu "
                                     "FROM rank_samples s JOIN jobs j USING (job_id) "
                                     "LEFT JOIN job_ranks r ON r.job_id = s.job_id AND r.rank = "
                                     "s.rank ORDER BY s.ts_ms, s.rank");
  }

  ReplayStats stats;
  size_t next_fact = 0;
  std::map<std::string, std::string> limits_in_force;  // by job key
  while (true) {
    std::optional<int64_t> ts;
    for (Cursor* c : {&disks, &pressure, cpu.get(), &gpus, jobs.get(), ranks.get()}) {
      if (!c) continue;
      if (auto t = c->next(); t && (!ts || *t < *ts)) ts = t;
    }
    if (!ts) break;
    collectors::SampleBatch b;
    b.wall_time_ms = *ts;
    for (; next_fact < facts.size() && facts[next_fact].ts <= *ts; ++next_fact)
      addTo(b, facts[next_fact]);
    int64_t interval_ms = 0;
    // Each table's rows of this tick, and the tick's interval from whichever has one.
    auto take = [&](Cursor* c, auto row, auto& into) {
      for (; c && c->at(*ts); c->step()) {
        interval_ms = c->int64("interval_ms");
        into.push_back(row(*c));
      }
    };
    take(&disks, diskRow, b.disks);
    take(&pressure, pressureRow, b.pressure);
    std::vector<collectors::CpuSample> cpus;
    take(cpu.get(), cpuRow, cpus);
    if (!cpus.empty()) b.cpu = cpus.back();
    take(&gpus, gpuRow, b.gpus);
    take(jobs.get(), jobRow, b.jobs);
    for (auto& j : b.jobs) {
      if (j.cgroup_limits == kLimitsAsBefore) {
        j.cgroup_limits = limits_in_force[j.key];
      } else {
        limits_in_force[j.key] = j.cgroup_limits;
      }
    }
    take(ranks.get(), rankRow, b.ranks);
    b.interval_seconds = static_cast<double>(interval_ms) / 1000.0;
    // Recordings before schema 3 kept only the GPUs' own utilisation: derive the job's mean.
    if (!has_job_gpu_util) collectors::attachJobGpuUtilization(b);
    if (stats.batches == 0) stats.first_ms = *ts;
    stats.last_ms = *ts;
    ++stats.batches;
    if (!fn(b)) break;
  }
  return stats;
}

}  // namespace stallwatch::storage
