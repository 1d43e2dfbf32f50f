#include "storage/job_series.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "storage/store.h"

namespace stallwatch::storage {
namespace {

std::vector<std::string> splitComma(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find(',', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::optional<double> optionalColumn(const SQLite::Column& c) {
  return c.isNull() ? std::nullopt : std::optional<double>(c.getDouble());
}

void bindRange(SQLite::Statement& st, int first_index, const TimeRange& r) {
  st.bind(first_index, r.since_ms.value_or(INT64_MIN));
  st.bind(first_index + 1, r.until_ms.value_or(INT64_MAX));
}

// Binds ?1 of a "WHERE ?1 IS NULL OR job_id = ?1" filter.
void bindJobFilter(SQLite::Statement& st, std::optional<int64_t> job_id) {
  if (job_id) {
    st.bind(1, *job_id);
  } else {
    st.bind(1);
  }
}

model::StallClass classFromString(const std::string& s) {
  for (int c = 0; c < model::kStallClassCount; ++c) {
    if (s == model::toString(static_cast<model::StallClass>(c))) {
      return static_cast<model::StallClass>(c);
    }
  }
  return model::StallClass::kNotStorage;
}

}  // namespace

std::vector<JobRecord> listJobs(SQLite::Database& db, std::optional<int64_t> job_id) {
  std::vector<JobRecord> jobs;
  SQLite::Statement q(db,
                      "SELECT job_id, job_key, coalesce(label, ''), coalesce(gpus, ''), started_ms, "
                      "ended_ms FROM jobs WHERE ?1 IS NULL OR job_id = ?1 ORDER BY started_ms");
  bindJobFilter(q, job_id);
  while (q.executeStep()) {
    JobRecord j;
    j.job_id = q.getColumn(0).getInt64();
    j.key = q.getColumn(1).getString();
    j.label = q.getColumn(2).getString();
    j.gpu_uuids = splitComma(q.getColumn(3).getString());
    j.started_ms = q.getColumn(4).getInt64();
    if (!q.getColumn(5).isNull()) j.ended_ms = q.getColumn(5).getInt64();
    jobs.push_back(std::move(j));
  }
  return jobs;
}

namespace {

// Walks rows ordered by ts_ms alongside the series' own sorted timestamps, calling FN(index)
// for each row whose timestamp is one of the series' ticks. Cheaper than hashing millions
// of timestamps.
template <typename Fn>
void mergeByTime(SQLite::Statement& q, const std::vector<int64_t>& ts, Fn fn) {
  size_t i = 0;
  while (q.executeStep()) {
    const int64_t t = q.getColumn(0).getInt64();
    while (i < ts.size() && ts[i] < t) ++i;
    if (i == ts.size()) break;
    if (ts[i] == t) fn(i);
  }
}

void loadDevice(SQLite::Database& db, int64_t device_id, const std::vector<int64_t>& ts,
                int64_t from_ms, int64_t to_ms, model::DeviceSeries& d, bool& any) {
  SQLite::Statement q(db, "SELECT ts_ms, r_await_ms, w_await_ms, aqu_sz FROM disk_samples "
                          "WHERE device_id = ? AND ts_ms BETWEEN ? AND ? ORDER BY ts_ms");
  q.bind(1, device_id);
  q.bind(2, from_ms);
  q.bind(3, to_ms);
  mergeByTime(q, ts, [&](size_t i) {
    d.r_await_ms[i] = optionalColumn(q.getColumn(1));
    d.w_await_ms[i] = optionalColumn(q.getColumn(2));
    d.aqu_sz[i] = optionalColumn(q.getColumn(3));
    any = true;
  });
}

model::DeviceSeries emptyDevice(std::string name, std::string via, bool job_reads, size_t n) {
  model::DeviceSeries d;
  d.name = std::move(name);
  d.via = std::move(via);
  d.job_reads = job_reads;
  d.r_await_ms.assign(n, std::nullopt);
  d.w_await_ms.assign(n, std::nullopt);
  d.aqu_sz.assign(n, std::nullopt);
  return d;
}

// The job's ranks (schema 6), each aligned on the job's ticks.
void loadRanks(SQLite::Database& db, int64_t job_id, int64_t from_ms, int64_t to_ms, model::JobSeries& s) {
  if (db.execAndGet("PRAGMA user_version").getInt() < 6) return;
  const size_t n = s.size();
  SQLite::Statement facts(db, "SELECT rank, pid, coalesce(gpu_uuid, '') FROM job_ranks WHERE job_id = ? ORDER BY rank");
  facts.bind(1, job_id);
  while (facts.executeStep()) {
    model::RankSeries r;
    r.rank = facts.getColumn(0).getInt();
    r.pid = static_cast<uint32_t>(facts.getColumn(1).getInt64());
    r.gpu = facts.getColumn(2).getString();
    r.forEachSeries([&](model::Series& x) { x.assign(n, std::nullopt); });
    s.ranks.push_back(std::move(r));
  }
  if (s.ranks.size() < 2) {
    s.ranks.clear();
    return;
  }
  SQLite::Statement q(db,
                      "SELECT ts_ms, rank, gpu_util_percent, gpu_work_percent, steps, data_wait_seconds, "
                      "read_bytes_per_second, write_bytes_per_second, workers_cpu_ratio, d_state_threads "
                      "FROM rank_samples WHERE job_id = ? AND ts_ms BETWEEN ? AND ? ORDER BY ts_ms, rank");
  q.bind(1, job_id);
  q.bind(2, from_ms);
  q.bind(3, to_ms);
  size_t i = 0;
  while (q.executeStep()) {
    const int64_t t = q.getColumn(0).getInt64();
    while (i < n && s.ts_ms[i] < t) ++i;
    if (i == n) break;
    if (s.ts_ms[i] != t) continue;
    const int32_t rank = q.getColumn(1).getInt();
    auto r = std::find_if(s.ranks.begin(), s.ranks.end(), [&](const auto& x) { return x.rank == rank; });
    if (r == s.ranks.end()) continue;
    r->gpu_util_percent[i] = optionalColumn(q.getColumn(2));
    r->gpu_work_percent[i] = optionalColumn(q.getColumn(3));
    r->steps[i] = optionalColumn(q.getColumn(4));
    r->data_wait_s[i] = optionalColumn(q.getColumn(5));
    r->read_bytes_per_s[i] = optionalColumn(q.getColumn(6));
    r->write_bytes_per_s[i] = optionalColumn(q.getColumn(7));
    r->workers_cpu[i] = optionalColumn(q.getColumn(8));
    r->d_state_threads[i] = optionalColumn(q.getColumn(9));
  }
}

std::string joinRanks(const std::vector<int32_t>& ranks) {
  std::string out;
  for (int32_t r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

std::vector<int32_t> splitRanks(const std::string& text) {
  std::vector<int32_t> out;
  for (const auto& part : splitComma(text)) {
    try {
      out.push_back(std::stoi(part));
    } catch (const std::exception&) {
      // a hand-edited row: skipped, the rest still read
    }
  }
  return out;
}

}  // namespace

int checkRecording(SQLite::Database& db, const std::string& path) {
  int version = 0;
  bool has_runs = false;
  try {
    version = db.execAndGet("PRAGMA user_version").getInt();
    has_runs = db.tableExists("runs");
  } catch (const SQLite::Exception& e) {
    throw StoreError(path + " is not a readable SQLite database: " + e.what());
  }
  if (version < 1 || !has_runs) {
    throw StoreError(path + " is not a stallwatch database (no stallwatch schema in it); nothing was changed");
  }
  if (version > kSchemaVersion) {
    throw StoreError(path + " has schema version " + std::to_string(version) + ", newer than this stallwatch (" +
                     std::to_string(kSchemaVersion) + ") understands; use a newer stallwatch");
  }
  return version;
}

SQLite::Database openForReading(const std::string& path, int min_version, const char* needs) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw StoreError(path + ": no such file");
  // One thread uses this connection: SQLite's per-call mutexes are pure cost (10 % of a report).
  SQLite::Database db(path, SQLite::OPEN_READONLY | SQLite::OPEN_NOMUTEX);
  const int version = checkRecording(db, path);
  if (version < min_version) {
    throw StoreError(path + " has no " + needs + " (recorded by an older stallwatch, schema " +
                     std::to_string(version) + ")");
  }
  db.exec("PRAGMA mmap_size = 17179869184");  // up to 16 GiB mapped: reads without copies
  db.exec("PRAGMA cache_size = -65536");      // 64 MiB
  return db;
}

model::JobSeries loadJobSeries(SQLite::Database& db, const JobRecord& job, const TimeRange& range) {
  model::JobSeries s;
  {
    // Read-only readers (report) do not migrate: a schema-2 recording has no per-job GPU mean,
    // one before schema 6 no GPU activity.
    const int version = db.execAndGet("PRAGMA user_version").getInt();
    SQLite::Statement q(db,
                        std::string("SELECT ts_ms, interval_ms, steps, data_wait_seconds, step_seconds, "
                                    "read_bytes_per_second, write_bytes_per_second, workers_cpu_ratio, "
                                    "d_state_threads, ") +
                            (version >= 3 ? "gpu_util_percent" : "NULL") + ", " +
                            (version >= 6 ? "gpu_work_percent" : "NULL") +
                            " FROM job_samples WHERE job_id = ? AND ts_ms BETWEEN ? AND ? ORDER BY ts_ms");
    q.bind(1, job.job_id);
    bindRange(q, 2, range);
    while (q.executeStep()) {
      const int64_t ts = q.getColumn(0).getInt64();
      if (!s.ts_ms.empty() && s.ts_ms.back() == ts) continue;
      s.gpu_util_percent.push_back(optionalColumn(q.getColumn(9)));
      s.gpu_work_percent.push_back(optionalColumn(q.getColumn(10)));
      s.ts_ms.push_back(ts);
      s.interval_s.push_back(q.getColumn(1).getDouble() / 1000.0);
      s.steps.push_back(optionalColumn(q.getColumn(2)));
      s.data_wait_s.push_back(optionalColumn(q.getColumn(3)));
      s.step_s.push_back(optionalColumn(q.getColumn(4)));
      s.read_bytes_per_s.push_back(optionalColumn(q.getColumn(5)));
      s.write_bytes_per_s.push_back(optionalColumn(q.getColumn(6)));
      s.workers_cpu.push_back(optionalColumn(q.getColumn(7)));
      s.d_state_threads.push_back(optionalColumn(q.getColumn(8)));
    }
  }
  const size_t n = s.ts_ms.size();
  if (n == 0) return s;
  const int64_t from = s.ts_ms.front(), to = s.ts_ms.back();
  s.io_some.assign(n, std::nullopt);
  s.cpu_some.assign(n, std::nullopt);

  // GPU utilisation: the recorder stores the job's mean with each sample (schema 3); for
  // recordings without it, the mean over the job's GPUs, one ordered index scan per GPU.
  for (const auto& uuid : job.gpu_uuids) s.gpu_count += uuid.empty() ? 0 : 1;
  const bool stored = std::any_of(s.gpu_util_percent.begin(), s.gpu_util_percent.end(),
                                  [](const auto& v) { return v.has_value(); });
  if (!stored && s.gpu_count > 0) {
    std::vector<double> sum(n, 0.0);
    std::vector<uint32_t> count(n, 0);
    for (const auto& uuid : job.gpu_uuids) {
      if (uuid.empty()) continue;
      SQLite::Statement q(db, "SELECT ts_ms, utilization_percent FROM gpu_samples WHERE gpu_id = "
                              "(SELECT gpu_id FROM gpus WHERE uuid = ?) AND ts_ms BETWEEN ? AND ? "
                              "ORDER BY ts_ms");
      q.bind(1, uuid);
      q.bind(2, from);
      q.bind(3, to);
      mergeByTime(q, s.ts_ms, [&](size_t i) {
        if (!q.getColumn(1).isNull()) {
          sum[i] += q.getColumn(1).getDouble();
          ++count[i];
        }
      });
    }
    for (size_t i = 0; i < n; ++i) {
      if (count[i]) s.gpu_util_percent[i] = sum[i] / count[i];
    }
  }
  for (const char* resource : {"io", "cpu"}) {
    auto& target = std::string(resource) == "io" ? s.io_some : s.cpu_some;
    SQLite::Statement q(db, "SELECT ts_ms, some_ratio FROM pressure_samples WHERE resource = ? "
                            "AND ts_ms BETWEEN ? AND ? ORDER BY ts_ms");
    q.bind(1, resource);
    q.bind(2, from);
    q.bind(3, to);
    mergeByTime(q, s.ts_ms, [&](size_t i) { target[i] = optionalColumn(q.getColumn(1)); });
  }
  SQLite::Statement devices(db, "SELECT jd.device_id, b.name, jd.via FROM job_devices jd JOIN block_devices b "
                                "USING (device_id) WHERE jd.job_id = ? ORDER BY jd.via <> '', b.name");
  devices.bind(1, job.job_id);
  // A device can be both where some of the job's files are and under a device holding
  // others (vda under loop0, with the job's scripts on vda): one series, both relations.
  std::vector<std::pair<int64_t, model::DeviceSeries>> loaded;
  while (devices.executeStep()) {
    const std::string name = devices.getColumn(1).getString();
    const std::string via = devices.getColumn(2).getString();
    auto same = std::find_if(loaded.begin(), loaded.end(), [&](const auto& l) { return l.second.name == name; });
    if (same != loaded.end()) {
      model::DeviceSeries& d = same->second;
      if (d.via.empty()) {
        d.via = via;
        d.also_direct = true;
      }
      continue;
    }
    loaded.emplace_back(devices.getColumn(0).getInt64(), emptyDevice(name, via, true, n));
  }
  for (auto& [id, d] : loaded) {
    bool any = false;
    loadDevice(db, id, s.ts_ms, from, to, d, any);
    if (any) s.devices.push_back(std::move(d));
  }
  loadRanks(db, job.job_id, from, to, s);
  return s;
}

void addOtherDevices(SQLite::Database& db, const JobRecord& job, model::JobSeries& s,
                     const std::vector<std::pair<size_t, size_t>>& windows) {
  if (windows.empty() || s.size() == 0) return;
  SQLite::Statement q(db, "SELECT device_id, name FROM block_devices WHERE device_id NOT IN "
                          "(SELECT device_id FROM job_devices WHERE job_id = ?) ORDER BY name");
  q.bind(1, job.job_id);
  while (q.executeStep()) {
    auto d = emptyDevice(q.getColumn(1).getString(), "", false, s.size());
    bool any = false;
    for (const auto& [first, last] : windows) {
      loadDevice(db, q.getColumn(0).getInt64(), s.ts_ms, s.ts_ms[first], s.ts_ms[std::min(last, s.size() - 1)], d, any);
    }
    if (any) s.devices.push_back(std::move(d));
  }
}

correlator::Analysis analyzeStoredJob(SQLite::Database& db, const JobRecord& job, model::JobSeries& series,
                                      const correlator::DetectorConfig& config) {
  correlator::Analysis a = correlator::analyzeJob(series, config);
  if (a.incidents.empty()) return a;
  std::vector<std::pair<size_t, size_t>> windows;
  for (const auto& inc : a.incidents) {
    const size_t from = inc.first > config.baseline_intervals * 2 ? inc.first - config.baseline_intervals * 2 : 0;
    windows.emplace_back(from, inc.last);
  }
  addOtherDevices(db, job, series, windows);
  return correlator::analyzeJob(series, config);  // detection does not look at devices: same incidents
}

std::string evidenceJson(const std::vector<model::EvidenceItem>& evidence) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : evidence) {
    j.push_back({{"signal", e.signal}, {"baseline", e.baseline}, {"during", e.during}, {"supports", e.supports}});
  }
  return j.dump();
}

std::vector<model::EvidenceItem> parseEvidenceJson(const std::string& text) {
  std::vector<model::EvidenceItem> out;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    if (!e.is_object()) continue;
    out.push_back({e.value("signal", ""), e.value("baseline", 0.0), e.value("during", 0.0),
                   e.value("supports", false)});
  }
  return out;
}

void bindIncident(SQLite::Statement& st, int first, const model::Incident& inc) {
  st.bind(first, inc.start_ms);
  st.bind(first + 1, inc.end_ms);
  st.bind(first + 2, model::toString(inc.cls));
  for (auto [offset, text] : {std::pair{3, &inc.device}, std::pair{4, &inc.physical_device}}) {
    if (text->empty()) {
      st.bind(first + offset);
    } else {
      st.bind(first + offset, *text);
    }
  }
  st.bind(first + 5, inc.idle_share);
  st.bind(first + 6, inc.gpu_seconds_lost);
  st.bind(first + 7, inc.confidence);
  st.bind(first + 8, evidenceJson(inc.evidence));
  if (inc.straggler) {
    st.bind(first + 9, inc.straggler->rank);
    st.bind(first + 10, static_cast<int64_t>(inc.straggler->pid));
    st.bind(first + 11, inc.straggler->gpu);
    st.bind(first + 12, joinRanks(inc.waiting_ranks));
  } else {
    for (int k = 9; k <= 11; ++k) st.bind(first + k);
    // No straggler: the ranks that starved alike, marked so.
    if (inc.ranks_starved.empty()) {
      st.bind(first + 12);
    } else {
      st.bind(first + 12, "all:" + joinRanks(inc.ranks_starved));
    }
  }
}

void replaceIncidents(SQLite::Database& db, int64_t job_id, const std::string& source,
                      const std::vector<model::Incident>& incidents, int64_t detected_ms) {
  SQLite::Transaction tx(db);
  SQLite::Statement del(db, "DELETE FROM incidents WHERE job_id = ? AND source = ?");
  del.bind(1, job_id);
  del.bind(2, source);
  del.exec();
  SQLite::Statement ins(db,
                        "INSERT INTO incidents (job_id, start_ms, end_ms, class, device, "
                        "physical_device, idle_share, gpu_seconds_lost, confidence, evidence, "
                        "straggler_rank, straggler_pid, straggler_gpu, waiting_ranks, "
                        "source, detected_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  for (const auto& inc : incidents) {
    ins.bind(1, job_id);
    bindIncident(ins, 2, inc);
    ins.bind(kIncidentFields + 2, source);
    ins.bind(kIncidentFields + 3, detected_ms);
    ins.exec();
    ins.reset();
  }
  tx.commit();
}

std::vector<StoredIncident> readIncidents(SQLite::Database& db, std::optional<int64_t> job_id) {
  std::vector<StoredIncident> out;
  const bool has_ranks = db.execAndGet("PRAGMA user_version").getInt() >= 6;
  SQLite::Statement q(db,
                      std::string("SELECT i.incident_id, i.job_id, coalesce(j.label, j.job_key), i.start_ms, "
                                  "i.end_ms, i.class, coalesce(i.device, ''), coalesce(i.physical_device, ''), "
                                  "i.idle_share, i.gpu_seconds_lost, i.confidence, i.evidence, i.source, "
                                  "i.detected_ms, ") +
                          (has_ranks ? "i.straggler_rank, i.straggler_pid, i.straggler_gpu, i.waiting_ranks"
                                     : "NULL, NULL, NULL, NULL") +
                          " FROM incidents i JOIN jobs j USING (job_id) "
                          "WHERE ?1 IS NULL OR i.job_id = ?1 ORDER BY i.start_ms");
  bindJobFilter(q, job_id);
  while (q.executeStep()) {
    StoredIncident s;
    s.incident_id = q.getColumn(0).getInt64();
    s.job_id = q.getColumn(1).getInt64();
    s.job_label = q.getColumn(2).getString();
    s.incident.start_ms = q.getColumn(3).getInt64();
    s.incident.end_ms = q.getColumn(4).getInt64();
    s.incident.cls = classFromString(q.getColumn(5).getString());
    s.incident.device = q.getColumn(6).getString();
    s.incident.physical_device = q.getColumn(7).getString();
    s.incident.idle_share = q.getColumn(8).getDouble();
    s.incident.gpu_seconds_lost = q.getColumn(9).getDouble();
    s.incident.confidence = q.getColumn(10).getDouble();
    s.incident.evidence = parseEvidenceJson(q.getColumn(11).getString());
    s.source = q.getColumn(12).getString();
    s.detected_ms = q.getColumn(13).getInt64();
    if (!q.getColumn(14).isNull()) {
      s.incident.straggler = model::Straggler{q.getColumn(14).getInt(),
                                                   static_cast<uint32_t>(q.getColumn(15).getInt64()),
                                                   q.getColumn(16).isNull() ? "" : q.getColumn(16).getString()};
    }
    if (const std::string ranks = q.getColumn(17).isNull() ? "" : q.getColumn(17).getString(); !ranks.empty()) {
      if (ranks.rfind("all:", 0) == 0) {
        s.incident.ranks_starved = splitRanks(ranks.substr(4));
      } else {
        s.incident.waiting_ranks = splitRanks(ranks);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stallwatch::storage
