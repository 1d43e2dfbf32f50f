#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "storage/recording.h"
#include "storage/sql_row.h"

namespace stallwatch::storage {
namespace {

std::optional<double> optionalDouble(const SQLite::Column& c) {
  return c.isNull() ? std::nullopt : std::optional<double>(c.getDouble());
}

template <typename T>
std::optional<T> optionalInt(const SQLite::Column& c) {
  return c.isNull() ? std::nullopt : std::optional<T>(static_cast<T>(c.getInt64()));
}

// One table's rows in time order, consumed tick by tick.
class Cursor {
 public:
  Cursor(SQLite::Database& db, const std::string& sql) : st_(db, sql) { step(); }
  bool at(int64_t ts) const { return has_row_ && st_.getColumn(0).getInt64() == ts; }
  std::optional<int64_t> next() const {
    return has_row_ ? std::optional<int64_t>(st_.getColumn(0).getInt64()) : std::nullopt;
  }
  SQLite::Statement& row() { return st_; }
  void step() { has_row_ = st_.executeStep(); }

 private:
  SQLite::Statement st_;
  bool has_row_ = false;
};

}  // namespace

ReplayStats Recording::replay(const std::function<bool(collectors::SampleBatch&)>& fn) {
  SQLite::Database& db = db_;
  // Replay reads each table once in time order: SQLite sorts them, and its sorter may use up
  // to the page cache in memory. A small cache keeps a week's replay within a few MB (the
  // sort spills to a temporary file instead).
  db.exec("PRAGMA cache_size = -8192");
  ReplayStats stats;
  const int version = version_;
  const bool has_jobs = version >= 2;
  const bool has_job_gpu_util = version >= 3;
  const bool has_ranks = version >= 6;  // ranks, GPU activity and power

  Cursor disks(
      db,
      "SELECT s.ts_ms, s.interval_ms, d.name, d.major, d.minor, s.reads_per_second, "
      "s.writes_per_second, s.read_bytes_per_second, s.write_bytes_per_second, s.r_await_ms, "
      "s.w_await_ms, s.discards_per_second, s.d_await_ms, s.flushes_per_second, s.f_await_ms, "
      "s.aqu_sz, s.util_percent, s.in_flight FROM disk_samples s JOIN block_devices d "
      "USING (device_id) ORDER BY s.ts_ms");
  Cursor pressure(
      db,
      "SELECT ts_ms, interval_ms, resource, some_ratio, full_ratio FROM pressure_samples "
      "ORDER BY ts_ms");
  Cursor gpus(
      db,
      std::string("SELECT s.ts_ms, s.interval_ms, g.gpu_index, g.uuid, s.utilization_percent, "
                  "s.utilization_sample_count, s.memory_utilization_percent, s.memory_used_bytes, "
                  "g.memory_total_bytes, s.sm_clock_mhz, ") +
          (has_ranks ? "s.power_watts, s.sm_active_percent, s.sm_occupancy_percent, "
                       "s.tensor_active_percent, s.dram_active_percent"
                     : "NULL, NULL, NULL, NULL, NULL") +
          " FROM gpu_samples s JOIN gpus g USING (gpu_id) ORDER BY s.ts_ms");
  std::unique_ptr<Cursor> ranks;
  if (has_ranks) {
    ranks = std::make_unique<Cursor>(
        db,
        "SELECT s.ts_ms, s.interval_ms, j.job_key, s.rank, s.processes, s.workers, "
        "s.read_bytes_per_second, "
        "s.write_bytes_per_second, s.main_cpu_ratio, s.workers_cpu_ratio, s.d_state_threads, "
        "coalesce(s.top_wchan, ''), s.steps, s.data_wait_seconds, s.step_seconds, "
        "s.gpu_util_percent, "
        "s.gpu_work_percent, coalesce(r.gpu_uuid, '') FROM rank_samples s JOIN jobs j USING "
        "(job_id) "
        "LEFT JOIN job_ranks r ON r.job_id = s.job_id AND r.rank = s.rank ORDER BY s.ts_ms, "
        "s.rank");
  }
  std::unique_ptr<Cursor> jobs;
  struct Fact {
    int64_t ts;
    collectors::JobDescription description;  // job_updates
    std::optional<collectors::JobDeviceFact> device;
    std::optional<collectors::RankDescription> rank;
  };
  std::vector<Fact> facts;
  if (has_jobs) {
    jobs = std::make_unique<Cursor>(
        db, std::string(
                "SELECT s.ts_ms, s.interval_ms, j.job_key, coalesce(j.gpus, ''), s.processes, "
                "s.workers, s.read_bytes_per_second, s.write_bytes_per_second, s.rchar_per_second, "
                "s.read_syscalls_per_second, s.main_cpu_ratio, s.workers_cpu_ratio, "
                "s.d_state_threads, coalesce(s.top_wchan, ''), s.steps, s.samples, "
                "s.data_wait_seconds, s.step_seconds, ") +
                (has_job_gpu_util ? "s.gpu_util_percent" : "NULL") + ", " +
                (has_ranks ? "s.gpu_work_percent" : "NULL") +
                " FROM job_samples s JOIN jobs j USING (job_id) ORDER BY s.ts_ms");
    for (const auto& job : Recording::jobs()) {
      collectors::JobDescription j;
      j.key = job.key;
      j.label = job.label;
      j.root_pid = static_cast<uint32_t>(job.root_pid);
      j.cmdline = job.cmdline;
      j.labels = job.labels;
      j.gpus = job.gpu_uuids;
      j.started_ms = job.started_ms;
      facts.push_back({j.started_ms, j, std::nullopt, std::nullopt});
      if (job.ended_ms) {
        j.ended_ms = job.ended_ms;
        facts.push_back({*j.ended_ms, j, std::nullopt, std::nullopt});
      }
    }
    SQLite::Statement d(db,
                        "SELECT jd.first_seen_ms, j.job_key, b.name, b.major, b.minor, jd.via, "
                        "jd.open_files_seen FROM job_devices jd JOIN jobs j USING (job_id) "
                        "JOIN block_devices b USING (device_id)");
    while (d.executeStep()) {
      collectors::JobDeviceFact f;
      f.key = d.getColumn(1).getString();
      f.device = d.getColumn(2).getString();
      f.major = static_cast<uint32_t>(d.getColumn(3).getInt64());
      f.minor = static_cast<uint32_t>(d.getColumn(4).getInt64());
      f.via = d.getColumn(5).getString();
      f.open_files = static_cast<uint32_t>(d.getColumn(6).getInt64());
      facts.push_back({d.getColumn(0).getInt64(), {}, f, std::nullopt});
    }
    if (has_ranks) {
      SQLite::Statement r(
          db,
          "SELECT r.first_seen_ms, j.job_key, r.rank, r.pid, coalesce(r.gpu_uuid, '') "
          "FROM job_ranks r JOIN jobs j USING (job_id)");
      while (r.executeStep()) {
        collectors::RankDescription rank;
        rank.key = r.getColumn(1).getString();
        rank.rank = r.getColumn(2).getInt();
        rank.pid = static_cast<uint32_t>(r.getColumn(3).getInt64());
        rank.gpu = r.getColumn(4).getString();
        facts.push_back({r.getColumn(0).getInt64(), {}, std::nullopt, rank});
      }
    }
    // Descriptions before device and rank facts of the same time: a fact needs its job.
    std::stable_sort(facts.begin(), facts.end(), [](const Fact& a, const Fact& b) {
      const bool a_fact = a.device || a.rank, b_fact = b.device || b.rank;
      return std::make_pair(a.ts, a_fact) < std::make_pair(b.ts, b_fact);
    });
  }

  size_t next_fact = 0;
  while (true) {
    std::optional<int64_t> ts;
    for (Cursor* c : {&disks, &pressure, &gpus, jobs.get(), ranks.get()}) {
      if (!c) continue;
      if (auto t = c->next(); t && (!ts || *t < *ts)) ts = t;
    }
    if (!ts) break;
    collectors::SampleBatch b;
    b.wall_time_ms = *ts;
    int64_t interval_ms = 0;
    for (; next_fact < facts.size() && facts[next_fact].ts <= *ts; ++next_fact) {
      Fact& f = facts[next_fact];
      if (f.device) {
        b.job_devices.push_back(std::move(*f.device));
      } else if (f.rank) {
        b.rank_updates.push_back(std::move(*f.rank));
      } else {
        b.job_updates.push_back(std::move(f.description));
      }
    }
    for (; disks.at(*ts); disks.step()) {
      auto& r = disks.row();
      interval_ms = r.getColumn(1).getInt64();
      collectors::DiskSample d;
      d.device = r.getColumn(2).getString();
      d.major = static_cast<uint32_t>(r.getColumn(3).getInt64());
      d.minor = static_cast<uint32_t>(r.getColumn(4).getInt64());
      d.rates.reads_per_second = r.getColumn(5).getDouble();
      d.rates.writes_per_second = r.getColumn(6).getDouble();
      d.rates.read_bytes_per_second = r.getColumn(7).getDouble();
      d.rates.write_bytes_per_second = r.getColumn(8).getDouble();
      d.rates.r_await_ms = optionalDouble(r.getColumn(9));
      d.rates.w_await_ms = optionalDouble(r.getColumn(10));
      d.rates.discards_per_second = optionalDouble(r.getColumn(11));
      d.rates.d_await_ms = optionalDouble(r.getColumn(12));
      d.rates.flushes_per_second = optionalDouble(r.getColumn(13));
      d.rates.f_await_ms = optionalDouble(r.getColumn(14));
      d.rates.aqu_sz = r.getColumn(15).getDouble();
      d.rates.util_percent = r.getColumn(16).getDouble();
      d.in_flight = static_cast<uint64_t>(r.getColumn(17).getInt64());
      b.disks.push_back(std::move(d));
    }
    for (; pressure.at(*ts); pressure.step()) {
      auto& r = pressure.row();
      interval_ms = r.getColumn(1).getInt64();
      b.pressure.push_back({r.getColumn(2).getString(), optionalDouble(r.getColumn(3)),
                            optionalDouble(r.getColumn(4))});
    }
    for (; gpus.at(*ts); gpus.step()) {
      auto& r = gpus.row();
      interval_ms = r.getColumn(1).getInt64();
      collectors::GpuSample g;
      g.gpu_index = static_cast<uint32_t>(r.getColumn(2).getInt64());
      g.uuid = r.getColumn(3).getString();
      g.utilization_percent = optionalDouble(r.getColumn(4));
      g.utilization_sample_count = static_cast<uint32_t>(r.getColumn(5).getInt64());
      g.memory_utilization_percent = optionalDouble(r.getColumn(6));
      g.memory_used_bytes = optionalInt<uint64_t>(r.getColumn(7));
      g.memory_total_bytes = optionalInt<uint64_t>(r.getColumn(8));
      g.sm_clock_mhz = optionalInt<uint32_t>(r.getColumn(9));
      g.power_watts = optionalDouble(r.getColumn(10));
      g.sm_active_percent = optionalDouble(r.getColumn(11));
      g.sm_occupancy_percent = optionalDouble(r.getColumn(12));
      g.tensor_active_percent = optionalDouble(r.getColumn(13));
      g.dram_active_percent = optionalDouble(r.getColumn(14));
      b.gpus.push_back(std::move(g));
    }
    for (; jobs && jobs->at(*ts); jobs->step()) {
      auto& r = jobs->row();
      interval_ms = r.getColumn(1).getInt64();
      collectors::JobSample j;
      j.key = r.getColumn(2).getString();
      for (auto& uuid : splitList(r.getColumn(3).getString())) {
        if (!uuid.empty()) j.gpus.push_back(std::move(uuid));
      }
      j.processes = static_cast<uint32_t>(r.getColumn(4).getInt64());
      j.workers = static_cast<uint32_t>(r.getColumn(5).getInt64());
      j.read_bytes_per_second = optionalDouble(r.getColumn(6));
      j.write_bytes_per_second = optionalDouble(r.getColumn(7));
      j.rchar_per_second = optionalDouble(r.getColumn(8));
      j.read_syscalls_per_second = optionalDouble(r.getColumn(9));
      j.main_cpu_ratio = optionalDouble(r.getColumn(10));
      j.workers_cpu_ratio = optionalDouble(r.getColumn(11));
      j.d_state_threads = static_cast<uint32_t>(r.getColumn(12).getInt64());
      j.top_wchan = r.getColumn(13).getString();
      j.steps = optionalInt<uint64_t>(r.getColumn(14));
      j.samples = optionalInt<uint64_t>(r.getColumn(15));
      j.data_wait_seconds = optionalDouble(r.getColumn(16));
      j.step_seconds = optionalDouble(r.getColumn(17));
      j.gpu_util_percent = optionalDouble(r.getColumn(18));
      j.gpu_work_percent = optionalDouble(r.getColumn(19));
      b.jobs.push_back(std::move(j));
    }
    for (; ranks && ranks->at(*ts); ranks->step()) {
      auto& r = ranks->row();
      interval_ms = r.getColumn(1).getInt64();
      collectors::RankSample k;
      k.key = r.getColumn(2).getString();
      k.rank = r.getColumn(3).getInt();
      k.processes = static_cast<uint32_t>(r.getColumn(4).getInt64());
      k.workers = static_cast<uint32_t>(r.getColumn(5).getInt64());
      k.read_bytes_per_second = optionalDouble(r.getColumn(6));
      k.write_bytes_per_second = optionalDouble(r.getColumn(7));
      k.main_cpu_ratio = optionalDouble(r.getColumn(8));
      k.workers_cpu_ratio = optionalDouble(r.getColumn(9));
      k.d_state_threads = static_cast<uint32_t>(r.getColumn(10).getInt64());
      k.top_wchan = r.getColumn(11).getString();
      k.steps = optionalInt<uint64_t>(r.getColumn(12));
      k.data_wait_seconds = optionalDouble(r.getColumn(13));
      k.step_seconds = optionalDouble(r.getColumn(14));
      k.gpu_util_percent = optionalDouble(r.getColumn(15));
      k.gpu_work_percent = optionalDouble(r.getColumn(16));
      k.gpu = r.getColumn(17).getString();
      b.ranks.push_back(std::move(k));
    }
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
