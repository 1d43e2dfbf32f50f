// Recording's series: a job's (or the host's) per-interval figures read back aligned on its own
// ticks, as the correlator judges them (model/series.h), and the host's other devices added
// around the windows a post-mortem explains.
#include <algorithm>
#include <optional>

#include "model/io_latency_histogram.h"
#include "storage/recording.h"
#include "storage/sql_row.h"

namespace stallwatch::storage {
namespace {

void bindRange(SQLite::Statement& st, const TimeRange& r) {
  st.bind(":since_ms", r.since_ms.value_or(INT64_MIN));
  st.bind(":until_ms", r.until_ms.value_or(INT64_MAX));
}

// Walks rows ordered by ts_ms (column "ts_ms") alongside the series' own sorted timestamps,
// calling FN(index) for each row whose timestamp is one of the series' ticks. Cheaper than
// hashing millions of timestamps.
template <typename Fn>
void mergeByTime(SQLite::Statement& q, const std::vector<int64_t>& ts, Fn fn) {
  const int ts_column = q.getColumnIndex("ts_ms");
  size_t i = 0;
  while (q.executeStep()) {
    const int64_t t = q.getColumn(ts_column).getInt64();
    while (i < ts.size() && ts[i] < t) ++i;
    if (i == ts.size()) break;
    if (ts[i] == t) fn(i);
  }
}

void loadDevice(SQLite::Database& db, int64_t device_id, const std::vector<int64_t>& ts,
                int64_t from_ms, int64_t to_ms, model::DeviceSeries& d, bool& any) {
  SQLite::Statement q(
      db,
      "SELECT ts_ms, r_await_ms, w_await_ms, aqu_sz, write_bytes_per_second, "
      "read_bytes_per_second, util_percent FROM disk_samples "
      "WHERE device_id = :device_id AND ts_ms BETWEEN :from_ms AND :to_ms ORDER BY ts_ms");
  q.bind(":device_id", device_id);
  q.bind(":from_ms", from_ms);
  q.bind(":to_ms", to_ms);
  const Columns c(q);
  const int r_await = c.index("r_await_ms"), w_await = c.index("w_await_ms"),
            aqu = c.index("aqu_sz"), written = c.index("write_bytes_per_second"),
            read = c.index("read_bytes_per_second"), util = c.index("util_percent");
  mergeByTime(q, ts, [&](size_t i) {
    d.r_await_ms[i] = optionalReal(q.getColumn(r_await));
    d.w_await_ms[i] = optionalReal(q.getColumn(w_await));
    d.aqu_sz[i] = optionalReal(q.getColumn(aqu));
    d.write_bytes_per_s[i] = optionalReal(q.getColumn(written));
    d.read_bytes_per_s[i] = optionalReal(q.getColumn(read));
    d.util_percent[i] = optionalReal(q.getColumn(util));
    any = true;
  });
}

// Device D's per-I/O read latency on the series' ticks (schema 12, where the eBPF collector ran):
// JOB_ID's own reads and everyone else's, each interval's rows merged.
void loadReadTail(SQLite::Database& db, int64_t device_id, int64_t job_id,
                  const model::JobSeries& s, int64_t from_ms, int64_t to_ms,
                  model::DeviceSeries& d) {
  SQLite::Statement q(db,
                      "SELECT ts_ms, job_id, count, slots FROM io_latency_samples "
                      "WHERE device_id = :device_id AND op = 'read' AND ts_ms BETWEEN :from_ms "
                      "AND :to_ms ORDER BY ts_ms");
  q.bind(":device_id", device_id);
  q.bind(":from_ms", from_ms);
  q.bind(":to_ms", to_ms);
  const Columns c(q);
  const int owner = c.index("job_id"), count = c.index("count"), slots = c.index("slots");
  std::optional<size_t> current;
  model::IoLatencySplit split;
  auto flush = [&] {
    if (!current) return;
    const size_t i = *current;
    const double seconds = std::max(s.interval_s[i], 1e-3);
    d.job_read_p99_ms[i] = model::ioLatencyQuantileMs(split.job, 0.99);
    d.others_read_p99_ms[i] = model::ioLatencyQuantileMs(split.others, 0.99);
    d.job_reads_per_s[i] = static_cast<double>(split.job_count) / seconds;
    d.others_reads_per_s[i] = static_cast<double>(split.others_count) / seconds;
    split = {};
  };
  mergeByTime(q, s.ts_ms, [&](size_t i) {
    if (current != i) flush();
    current = i;
    const bool the_jobs = !q.getColumn(owner).isNull() && q.getColumn(owner).getInt64() == job_id;
    split.add(the_jobs, static_cast<uint64_t>(q.getColumn(count).getInt64()),
              q.getColumn(slots).getString());
  });
  flush();
}

// The host's I/O, CPU and memory pressure on the series' ticks, and its CPUs (schema 11).
void loadPressure(SQLite::Database& db, int version, int64_t from_ms, int64_t to_ms,
                  model::JobSeries& s) {
  for (auto [resource, target] : {std::pair{"io", &s.io_some}, std::pair{"cpu", &s.cpu_some},
                                  std::pair{"memory", &s.memory_some}}) {
    SQLite::Statement q(db,
                        "SELECT ts_ms, some_ratio FROM pressure_samples WHERE resource = :resource "
                        "AND ts_ms BETWEEN :from_ms AND :to_ms ORDER BY ts_ms");
    q.bind(":resource", resource);
    q.bind(":from_ms", from_ms);
    q.bind(":to_ms", to_ms);
    const int some_c = q.getColumnIndex("some_ratio");
    mergeByTime(q, s.ts_ms,
                [&, t = target](size_t i) { (*t)[i] = optionalReal(q.getColumn(some_c)); });
  }
  if (version < 11) return;
  SQLite::Statement q(db,
                      "SELECT ts_ms, busy_cores, online_cpus FROM cpu_samples WHERE ts_ms BETWEEN "
                      ":from_ms AND :to_ms ORDER BY ts_ms");
  q.bind(":from_ms", from_ms);
  q.bind(":to_ms", to_ms);
  const Columns c(q);
  const int busy_c = c.index("busy_cores"), online_c = c.index("online_cpus");
  mergeByTime(q, s.ts_ms, [&](size_t i) {
    s.host_busy_cores[i] = optionalReal(q.getColumn(busy_c));
    s.host_online_cpus[i] = optionalReal(q.getColumn(online_c));
  });
}

// The job's ranks (schema 6), each aligned on the job's ticks.
void loadRanks(SQLite::Database& db, int version, int64_t job_id, int64_t from_ms, int64_t to_ms,
               model::JobSeries& s) {
  const size_t n = s.size();
  SQLite::Statement facts(db,
                          "SELECT rank, pid, coalesce(gpu_uuid, '') AS gpu FROM job_ranks "
                          "WHERE job_id = :job_id ORDER BY rank");
  facts.bind(":job_id", job_id);
  const Columns f(facts);
  while (facts.executeStep()) {
    model::RankSeries& r = model::addRank(s, static_cast<int32_t>(f.int64("rank")));
    r.pid = static_cast<uint32_t>(f.int64("pid"));
    r.gpu = f.text("gpu");
  }
  if (s.ranks.size() < 2) {
    s.ranks.clear();
    return;
  }
  SQLite::Statement q(
      db,
      std::string("SELECT ts_ms, rank, gpu_util_percent, gpu_work_percent, steps, "
                  "data_wait_seconds, step_seconds, read_bytes_per_second, write_bytes_per_second, "
                  "workers_cpu_ratio, d_state_threads, workers, main_cpu_ratio, ") +
          (version >= 11
               ? "main_thread_cpu_ratio, main_thread_runqueue_ratio, stopped_processes, "
                 "cgroup_limited_read_bytes_per_second, "
                 "cgroup_read_limit_bytes_per_second, cgroup_cpu_throttled_ratio, "
                 "cgroup_io_some, main_thread_loader_wait_ratio, main_thread_futex_wait_ratio, "
                 "pin_memory"
               : "NULL AS main_thread_loader_wait_ratio, NULL AS main_thread_futex_wait_ratio, "
                 "NULL AS pin_memory, NULL AS main_thread_cpu_ratio, NULL AS "
                 "main_thread_runqueue_ratio, "
                 "NULL AS stopped_processes, NULL AS "
                 "cgroup_limited_read_bytes_per_second, NULL AS "
                 "cgroup_read_limit_bytes_per_second, NULL AS cgroup_cpu_throttled_ratio, "
                 "NULL AS cgroup_io_some") +
          " FROM rank_samples WHERE job_id = :job_id AND ts_ms BETWEEN :from_ms AND :to_ms "
          "ORDER BY ts_ms, rank");
  q.bind(":job_id", job_id);
  q.bind(":from_ms", from_ms);
  q.bind(":to_ms", to_ms);
  const Columns c(q);
  const int ts_c = c.index("ts_ms"), rank_c = c.index("rank"), util_c = c.index("gpu_util_percent"),
            work_c = c.index("gpu_work_percent"), steps_c = c.index("steps"),
            wait_c = c.index("data_wait_seconds"), read_c = c.index("read_bytes_per_second"),
            write_c = c.index("write_bytes_per_second"), cpu_c = c.index("workers_cpu_ratio"),
            d_c = c.index("d_state_threads"), workers_c = c.index("workers"),
            main_cpu_c = c.index("main_cpu_ratio"), step_c = c.index("step_seconds"),
            thread_c = c.index("main_thread_cpu_ratio"),
            runqueue_c = c.index("main_thread_runqueue_ratio"),
            stopped_c = c.index("stopped_processes"),
            cg_read_c = c.index("cgroup_limited_read_bytes_per_second"),
            cg_limit_c = c.index("cgroup_read_limit_bytes_per_second"),
            cg_thr_c = c.index("cgroup_cpu_throttled_ratio"), cg_io_c = c.index("cgroup_io_some"),
            loader_c = c.index("main_thread_loader_wait_ratio"),
            futex_c = c.index("main_thread_futex_wait_ratio"), pin_c = c.index("pin_memory");
  size_t i = 0;
  while (q.executeStep()) {
    const int64_t t = q.getColumn(ts_c).getInt64();
    while (i < n && s.ts_ms[i] < t) ++i;
    if (i == n) break;
    if (s.ts_ms[i] != t) continue;
    const int32_t rank = q.getColumn(rank_c).getInt();
    auto r =
        std::find_if(s.ranks.begin(), s.ranks.end(), [&](const auto& x) { return x.rank == rank; });
    if (r == s.ranks.end()) continue;
    r->gpu_util_percent[i] = optionalReal(q.getColumn(util_c));
    r->gpu_work_percent[i] = optionalReal(q.getColumn(work_c));
    r->steps[i] = optionalReal(q.getColumn(steps_c));
    r->data_wait_s[i] = optionalReal(q.getColumn(wait_c));
    r->read_bytes_per_s[i] = optionalReal(q.getColumn(read_c));
    r->write_bytes_per_s[i] = optionalReal(q.getColumn(write_c));
    r->workers_cpu[i] = optionalReal(q.getColumn(cpu_c));
    r->d_state_threads[i] = optionalReal(q.getColumn(d_c));
    r->workers[i] = optionalReal(q.getColumn(workers_c));
    r->main_cpu[i] = optionalReal(q.getColumn(main_cpu_c));
    r->step_s[i] = optionalReal(q.getColumn(step_c));
    r->main_thread_cpu[i] = optionalReal(q.getColumn(thread_c));
    r->main_thread_runqueue[i] = optionalReal(q.getColumn(runqueue_c));
    r->stopped_processes[i] = optionalReal(q.getColumn(stopped_c));
    r->cgroup_limited_read_bytes_per_s[i] = optionalReal(q.getColumn(cg_read_c));
    r->cgroup_read_limit_bytes_per_s[i] = optionalReal(q.getColumn(cg_limit_c));
    r->cgroup_cpu_throttled[i] = optionalReal(q.getColumn(cg_thr_c));
    r->cgroup_io_some[i] = optionalReal(q.getColumn(cg_io_c));
    r->main_thread_loader_wait[i] = optionalReal(q.getColumn(loader_c));
    r->main_thread_futex_wait[i] = optionalReal(q.getColumn(futex_c));
    r->pin_memory[i] = optionalReal(q.getColumn(pin_c));
  }
}

// The node summary's one rank (Recording::Detail::kNodeSummary): the job's own figures, with
// the least busy GPU and the longest data wait of its ranks where it ran several (PER_RANK).
void loadSlowestRank(SQLite::Database& db, int64_t job_id, bool per_rank, model::JobSeries& s) {
  model::RankSeries& r = s.ranks.front();
  // Only what the node is judged by; the rest stays empty (a day of sixteen nodes' series
  // is hundreds of MB).
  const model::Series* judged[] = {&s.steps,       &s.gpu_util_percent, &s.gpu_work_percent,
                                   &s.data_wait_s, &s.read_bytes_per_s, &s.write_bytes_per_s,
                                   &s.workers_cpu, &s.d_state_threads};
  s.forEachSeries([&](model::Series& x) {
    if (std::find(std::begin(judged), std::end(judged), &x) == std::end(judged))
      model::Series().swap(x);
  });
  s.forEachText([](std::vector<std::string>& x) { std::vector<std::string>().swap(x); });
  r.gpu_util_percent = s.gpu_util_percent;
  r.gpu_work_percent = s.gpu_work_percent;
  r.data_wait_s = s.data_wait_s;
  if (!per_rank) return;
  // One row per interval, aggregated inside SQLite from the (job_id, ts_ms, rank) index.
  SQLite::Statement q(db,
                      "SELECT ts_ms, min(gpu_util_percent) AS gpu_util, "
                      "min(gpu_work_percent) AS gpu_work, max(data_wait_seconds) AS data_wait "
                      "FROM rank_samples WHERE job_id = :job_id AND ts_ms BETWEEN :from_ms AND "
                      ":to_ms GROUP BY ts_ms ORDER BY ts_ms");
  q.bind(":job_id", job_id);
  q.bind(":from_ms", s.ts_ms.front());
  q.bind(":to_ms", s.ts_ms.back());
  const Columns c(q);
  const int util_c = c.index("gpu_util"), work_c = c.index("gpu_work"),
            wait_c = c.index("data_wait");
  mergeByTime(q, s.ts_ms, [&](size_t i) {
    if (auto v = optionalReal(q.getColumn(util_c))) r.gpu_util_percent[i] = v;
    if (auto v = optionalReal(q.getColumn(work_c))) r.gpu_work_percent[i] = v;
    if (auto v = optionalReal(q.getColumn(wait_c))) r.data_wait_s[i] = v;
  });
}

// The job's own samples over RANGE into S, one row an interval (columns a recording's schema
// lacks read as none).
void loadJobSamples(SQLite::Database& db, int version, const JobRecord& job, const TimeRange& range,
                    model::JobSeries& s) {
  // Read-only readers do not migrate: a schema-2 recording has no per-job GPU mean, one
  // before schema 6 no GPU activity.
  SQLite::Statement q(
      db,
      std::string("SELECT ts_ms, interval_ms, steps, data_wait_seconds, step_seconds, "
                  "read_bytes_per_second, write_bytes_per_second, workers_cpu_ratio, "
                  "d_state_threads, top_wchan, workers, rchar_per_second, main_cpu_ratio, ") +
          (version >= 3 ? "gpu_util_percent" : "NULL AS gpu_util_percent") + ", " +
          (version >= 6 ? "gpu_work_percent" : "NULL AS gpu_work_percent") +
          (version >= 8 ? ", cgroup_io_some, cgroup_cpu_some, cgroup_memory_some, "
                          "cgroup_cpu_throttled_ratio, "
                          "cgroup_limited_read_bytes_per_second, "
                          "cgroup_read_limit_bytes_per_second, cgroup_limits"
                        : ", NULL AS cgroup_io_some, NULL AS cgroup_cpu_some, NULL AS "
                          "cgroup_memory_some, NULL AS "
                          "cgroup_cpu_throttled_ratio, NULL AS "
                          "cgroup_limited_read_bytes_per_second, NULL AS "
                          "cgroup_read_limit_bytes_per_second, NULL AS cgroup_limits") +
          (version >= 9 ? ", neighbour_io" : ", NULL AS neighbour_io") +
          (version >= 10 ? ", sleep_wchan" : ", NULL AS sleep_wchan") +
          (version >= 11
               ? ", main_thread_cpu_ratio, main_thread_runqueue_ratio, "
                 "stopped_processes, workers_sleep_wchan, cpus_allowed, "
                 "cgroup_read_limit, main_thread_loader_wait_ratio, "
                 "main_thread_futex_wait_ratio, pin_memory"
               : ", NULL AS main_thread_loader_wait_ratio, NULL AS main_thread_futex_wait_ratio, "
                 "NULL AS pin_memory, NULL AS main_thread_cpu_ratio, NULL AS "
                 "main_thread_runqueue_ratio, "
                 "NULL AS stopped_processes, NULL AS workers_sleep_wchan, NULL AS "
                 "cpus_allowed, NULL AS cgroup_read_limit") +
          " FROM job_samples WHERE job_id = :job_id AND ts_ms BETWEEN :since_ms AND :until_ms "
          "ORDER BY ts_ms");
  q.bind(":job_id", job.job_id);
  bindRange(q, range);
  const Columns c(q);
  const int ts_c = c.index("ts_ms"), interval_c = c.index("interval_ms"),
            steps_c = c.index("steps"), wait_c = c.index("data_wait_seconds"),
            step_c = c.index("step_seconds"), read_c = c.index("read_bytes_per_second"),
            write_c = c.index("write_bytes_per_second"), cpu_c = c.index("workers_cpu_ratio"),
            d_c = c.index("d_state_threads"), util_c = c.index("gpu_util_percent"),
            work_c = c.index("gpu_work_percent"), wchan_c = c.index("top_wchan"),
            cg_io_c = c.index("cgroup_io_some"), cg_cpu_c = c.index("cgroup_cpu_some"),
            cg_mem_c = c.index("cgroup_memory_some"),
            cg_thr_c = c.index("cgroup_cpu_throttled_ratio"),
            cg_read_c = c.index("cgroup_limited_read_bytes_per_second"),
            cg_limit_c = c.index("cgroup_read_limit_bytes_per_second"),
            cg_limits_c = c.index("cgroup_limits"), neighbour_c = c.index("neighbour_io"),
            sleep_c = c.index("sleep_wchan"), workers_c = c.index("workers"),
            rchar_c = c.index("rchar_per_second"), main_cpu_c = c.index("main_cpu_ratio"),
            thread_c = c.index("main_thread_cpu_ratio"),
            runqueue_c = c.index("main_thread_runqueue_ratio"),
            stopped_c = c.index("stopped_processes"),
            workers_sleep_c = c.index("workers_sleep_wchan"), cpus_c = c.index("cpus_allowed"),
            read_limit_c = c.index("cgroup_read_limit"),
            loader_c = c.index("main_thread_loader_wait_ratio"),
            futex_c = c.index("main_thread_futex_wait_ratio"), pin_c = c.index("pin_memory");
  // The limits are written when they change: those in force when the range starts come from
  // the last row before it that names them.
  std::string limits_in_force;
  if (version >= 8) {
    SQLite::Statement before(db,
                             "SELECT cgroup_limits FROM job_samples WHERE job_id = :job_id AND "
                             "ts_ms < :since_ms AND cgroup_limits IS NOT NULL ORDER BY ts_ms "
                             "DESC LIMIT 1");
    before.bind(":job_id", job.job_id);
    before.bind(":since_ms", range.since_ms.value_or(INT64_MIN));
    if (before.executeStep()) limits_in_force = before.getColumn(0).getString();
  }
  while (q.executeStep()) {
    const int64_t ts = q.getColumn(ts_c).getInt64();
    if (!s.ts_ms.empty() && s.ts_ms.back() == ts) continue;
    const size_t i = model::appendInterval(s, ts, q.getColumn(interval_c).getDouble() / 1000.0);
    s.gpu_util_percent[i] = optionalReal(q.getColumn(util_c));
    s.gpu_work_percent[i] = optionalReal(q.getColumn(work_c));
    s.steps[i] = optionalReal(q.getColumn(steps_c));
    s.data_wait_s[i] = optionalReal(q.getColumn(wait_c));
    s.step_s[i] = optionalReal(q.getColumn(step_c));
    s.read_bytes_per_s[i] = optionalReal(q.getColumn(read_c));
    s.write_bytes_per_s[i] = optionalReal(q.getColumn(write_c));
    s.workers_cpu[i] = optionalReal(q.getColumn(cpu_c));
    s.d_state_threads[i] = optionalReal(q.getColumn(d_c));
    if (!q.getColumn(wchan_c).isNull()) s.d_state_wchan[i] = q.getColumn(wchan_c).getString();
    if (!q.getColumn(sleep_c).isNull()) s.sleep_wchan[i] = q.getColumn(sleep_c).getString();
    s.cgroup_io_some[i] = optionalReal(q.getColumn(cg_io_c));
    s.cgroup_cpu_some[i] = optionalReal(q.getColumn(cg_cpu_c));
    s.cgroup_memory_some[i] = optionalReal(q.getColumn(cg_mem_c));
    s.cgroup_cpu_throttled[i] = optionalReal(q.getColumn(cg_thr_c));
    s.cgroup_limited_read_bytes_per_s[i] = optionalReal(q.getColumn(cg_read_c));
    s.cgroup_read_limit_bytes_per_s[i] = optionalReal(q.getColumn(cg_limit_c));
    if (!q.getColumn(cg_limits_c).isNull()) limits_in_force = q.getColumn(cg_limits_c).getString();
    s.cgroup_limits[i] = limits_in_force;
    if (!q.getColumn(neighbour_c).isNull())
      s.neighbour_io[i] = q.getColumn(neighbour_c).getString();
    s.workers[i] = optionalReal(q.getColumn(workers_c));
    s.rchar_per_s[i] = optionalReal(q.getColumn(rchar_c));
    s.main_cpu[i] = optionalReal(q.getColumn(main_cpu_c));
    s.main_thread_cpu[i] = optionalReal(q.getColumn(thread_c));
    s.main_thread_runqueue[i] = optionalReal(q.getColumn(runqueue_c));
    s.stopped_processes[i] = optionalReal(q.getColumn(stopped_c));
    s.cpus_allowed[i] = optionalReal(q.getColumn(cpus_c));
    s.main_thread_loader_wait[i] = optionalReal(q.getColumn(loader_c));
    s.main_thread_futex_wait[i] = optionalReal(q.getColumn(futex_c));
    s.pin_memory[i] = optionalReal(q.getColumn(pin_c));
    if (!q.getColumn(workers_sleep_c).isNull())
      s.workers_sleep_wchan[i] = q.getColumn(workers_sleep_c).getString();
    if (!q.getColumn(read_limit_c).isNull())
      s.cgroup_read_limit[i] = q.getColumn(read_limit_c).getString();
  }
}

// GPU utilisation: the recorder stores the job's mean with each sample (schema 3); for
// recordings without it, the mean over the job's GPUs, one ordered index scan per GPU.
void loadGpuMean(SQLite::Database& db, const JobRecord& job, model::JobSeries& s) {
  const size_t n = s.ts_ms.size();
  const int64_t from = s.ts_ms.front(), to = s.ts_ms.back();
  s.gpu_count = static_cast<uint32_t>(job.gpu_uuids.size());
  const bool stored = std::any_of(s.gpu_util_percent.begin(), s.gpu_util_percent.end(),
                                  [](const auto& v) { return v.has_value(); });
  if (!stored && s.gpu_count > 0) {
    std::vector<double> sum(n, 0.0);
    std::vector<uint32_t> count(n, 0);
    for (const auto& uuid : job.gpu_uuids) {
      SQLite::Statement q(
          db,
          "SELECT ts_ms, utilization_percent FROM gpu_samples WHERE gpu_id = "
          "(SELECT gpu_id FROM gpus WHERE uuid = :uuid) AND ts_ms BETWEEN :from_ms AND :to_ms "
          "ORDER BY ts_ms");
      q.bind(":uuid", uuid);
      q.bind(":from_ms", from);
      q.bind(":to_ms", to);
      const int util_c = q.getColumnIndex("utilization_percent");
      mergeByTime(q, s.ts_ms, [&](size_t i) {
        if (!q.getColumn(util_c).isNull()) {
          sum[i] += q.getColumn(util_c).getDouble();
          ++count[i];
        }
      });
    }
    for (size_t i = 0; i < n; ++i) {
      if (count[i]) s.gpu_util_percent[i] = sum[i] / count[i];
    }
  }
}

}  // namespace

model::JobSeries Recording::jobSeries(const JobRecord& job, const TimeRange& range, Detail detail) {
  model::JobSeries s;
  loadJobSamples(db_, version_, job, range, s);
  if (s.ts_ms.empty()) return s;
  s.ended_ms = job.ended_ms;
  const int64_t from = s.ts_ms.front(), to = s.ts_ms.back();
  loadGpuMean(db_, job, s);
  if (detail == Detail::kNodeSummary) {
    const auto ranks = ranksOf(job);
    model::RankSeries& node =
        model::addRank(s, ranks.empty() ? 0 : *std::min_element(ranks.begin(), ranks.end()));
    node.pid = static_cast<uint32_t>(job.root_pid);
    if (!job.gpu_uuids.empty()) node.gpu = job.gpu_uuids.front();
    loadSlowestRank(db_, job.job_id, version_ >= 6 && ranks.size() >= 2, s);
    return s;
  }
  loadPressure(db_, version_, from, to, s);
  SQLite::Statement devices(
      db_,
      "SELECT jd.device_id, b.name, jd.via FROM job_devices jd JOIN block_devices b "
      "USING (device_id) WHERE jd.job_id = :job_id ORDER BY jd.via <> '', b.name");
  devices.bind(":job_id", job.job_id);
  const Columns dc(devices);
  std::map<std::string, int64_t> device_ids;
  while (devices.executeStep()) {
    model::addDevice(s, dc.text("name"), dc.text("via"), true);
    device_ids.emplace(dc.text("name"), dc.int64("device_id"));
  }
  // Only devices with samples in the span stay.
  for (auto it = s.devices.begin(); it != s.devices.end();) {
    bool any = false;
    loadDevice(db_, device_ids.at(it->name), s.ts_ms, from, to, *it, any);
    if (any && version_ >= 12)
      loadReadTail(db_, device_ids.at(it->name), job.job_id, s, from, to, *it);
    it = any ? std::next(it) : s.devices.erase(it);
  }
  if (version_ >= 6) loadRanks(db_, version_, job.job_id, from, to, s);
  return s;
}

void Recording::nodeSamples(const JobRecord& job, const TimeRange& range,
                            model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
  // Without a per-job GPU mean stored (before schema 3, or none written), the summary computes
  // it from the GPUs' own samples: read whole, then handed on.
  bool materialise = version_ < 3;
  if (!materialise && !job.gpu_uuids.empty()) {
    SQLite::Statement any(db_,
                          "SELECT EXISTS (SELECT 1 FROM job_samples WHERE job_id = :job_id AND "
                          "gpu_util_percent IS NOT NULL)");
    any.bind(":job_id", job.job_id);
    materialise = !(any.executeStep() && any.getColumn(0).getInt() != 0);
  }
  if (materialise) {
    const model::JobSeries s = jobSeries(job, range, Detail::kNodeSummary);
    for (size_t i = 0; i < s.size(); ++i) sink(model::nodeSampleAt(s, i));
    return;
  }
  const bool all = fields == model::NodeSampleFields::kAll;
  SQLite::Statement q(
      db_, std::string("SELECT ts_ms, interval_ms, steps, gpu_util_percent, ") +
               (version_ >= 6 ? "gpu_work_percent" : "NULL AS gpu_work_percent") +
               (all ? ", data_wait_seconds, read_bytes_per_second, write_bytes_per_second, "
                      "workers_cpu_ratio, d_state_threads"
                    : "") +
               " FROM job_samples WHERE job_id = :job_id AND ts_ms BETWEEN :since_ms AND "
               ":until_ms ORDER BY ts_ms");
  q.bind(":job_id", job.job_id);
  bindRange(q, range);
  // The slowest of the node's ranks, where it ran several: one row per interval, aggregated
  // inside SQLite from the (job_id, ts_ms, rank) index, walked beside the job's rows.
  std::optional<SQLite::Statement> ranks;
  if (all && version_ >= 6 && ranksOf(job).size() >= 2) {
    ranks.emplace(db_,
                  "SELECT ts_ms, min(gpu_util_percent), min(gpu_work_percent), "
                  "max(data_wait_seconds) FROM rank_samples WHERE job_id = :job_id AND ts_ms "
                  "BETWEEN :since_ms AND :until_ms GROUP BY ts_ms ORDER BY ts_ms");
    ranks->bind(":job_id", job.job_id);
    bindRange(*ranks, range);
  }
  bool rank_row = ranks && ranks->executeStep();
  int64_t last = INT64_MIN;
  while (q.executeStep()) {
    model::NodeSample x;
    x.ts_ms = q.getColumn(0).getInt64();
    if (x.ts_ms == last) continue;
    last = x.ts_ms;
    x.interval_s = q.getColumn(1).getDouble() / 1000.0;
    x.steps = optionalReal(q.getColumn(2));
    x.gpu_util_percent = optionalReal(q.getColumn(3));
    x.gpu_work_percent = optionalReal(q.getColumn(4));
    if (all) {
      x.data_wait_s = optionalReal(q.getColumn(5));
      x.read_bytes_per_s = optionalReal(q.getColumn(6));
      x.write_bytes_per_s = optionalReal(q.getColumn(7));
      x.workers_cpu = optionalReal(q.getColumn(8));
      x.d_state_threads = optionalReal(q.getColumn(9));
      x.rank_gpu_util_percent = x.gpu_util_percent;
      x.rank_gpu_work_percent = x.gpu_work_percent;
      x.rank_data_wait_s = x.data_wait_s;
      while (rank_row && ranks->getColumn(0).getInt64() < x.ts_ms) rank_row = ranks->executeStep();
      if (rank_row && ranks->getColumn(0).getInt64() == x.ts_ms) {
        if (auto v = optionalReal(ranks->getColumn(1))) x.rank_gpu_util_percent = v;
        if (auto v = optionalReal(ranks->getColumn(2))) x.rank_gpu_work_percent = v;
        if (auto v = optionalReal(ranks->getColumn(3))) x.rank_data_wait_s = v;
      }
    }
    sink(x);
  }
}

model::JobSeries Recording::hostSeries(const TimeRange& range) {
  model::JobSeries s;
  {
    SQLite::Statement q(db_,
                        "SELECT DISTINCT ts_ms FROM disk_samples WHERE ts_ms BETWEEN :since_ms AND "
                        ":until_ms ORDER BY ts_ms");
    bindRange(q, range);
    int64_t last = 0;
    while (q.executeStep()) {
      const int64_t ts = q.getColumn(0).getInt64();
      // An interval is the time since the previous tick; the first is taken as a second.
      const double interval_s = last ? static_cast<double>(ts - last) / 1000.0 : 1.0;
      model::appendInterval(s, ts, interval_s);
      last = ts;
    }
  }
  if (s.ts_ms.empty()) return s;
  const int64_t from = s.ts_ms.front(), to = s.ts_ms.back();
  loadPressure(db_, version_, from, to, s);
  SQLite::Statement q(db_, "SELECT device_id, name FROM block_devices ORDER BY name");
  const Columns c(q);
  while (q.executeStep()) {
    const size_t before = s.devices.size();  // a name seen again (a re-added disk) shares one
    model::DeviceSeries& d = model::addDevice(s, c.text("name"), "", false);
    bool any = false;
    loadDevice(db_, c.int64("device_id"), s.ts_ms, from, to, d, any);
    if (!any && s.devices.size() > before) s.devices.pop_back();
  }
  return s;
}

std::optional<std::pair<int64_t, int64_t>> Recording::sampleSpan(const JobRecord& job,
                                                                 const TimeRange& range) {
  SQLite::Statement q(
      db_,
      "SELECT ts_ms - interval_ms AS from_ms, "
      "(SELECT max(ts_ms) FROM job_samples WHERE job_id = :job_id AND ts_ms BETWEEN "
      ":since_ms AND :until_ms) AS to_ms FROM job_samples WHERE job_id = :job_id AND ts_ms "
      "BETWEEN :since_ms AND :until_ms ORDER BY ts_ms LIMIT 1");
  q.bind(":job_id", job.job_id);
  bindRange(q, range);
  if (!q.executeStep()) return std::nullopt;
  const Columns c(q);
  return std::pair{c.int64("from_ms"), c.int64("to_ms")};
}

void Recording::addOtherDevices(const JobRecord& job, model::JobSeries& s,
                                const IntervalWindows& windows) {
  if (windows.empty() || s.size() == 0) return;
  SQLite::Statement q(db_,
                      "SELECT device_id, name FROM block_devices WHERE device_id NOT IN "
                      "(SELECT device_id FROM job_devices WHERE job_id = :job_id) ORDER BY name");
  q.bind(":job_id", job.job_id);
  const Columns c(q);
  while (q.executeStep()) {
    const std::string name = c.text("name");
    model::DeviceSeries& d = model::addDevice(s, name, "", false);
    bool any = false;
    for (const auto& [first, last] : windows) {
      loadDevice(db_, c.int64("device_id"), s.ts_ms, s.ts_ms[first],
                 s.ts_ms[std::min(last, s.size() - 1)], d, any);
    }
    if (!any) {
      s.devices.erase(std::find_if(s.devices.begin(), s.devices.end(),
                                   [&](const auto& x) { return x.name == name; }));
    }
  }
}

}  // namespace stallwatch::storage
