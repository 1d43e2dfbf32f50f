#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/report.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct JobsArgs {
  std::string db;
  bool json = false;
};

struct JobRow {
  int64_t id = 0;
  std::string key, label, labels, gpus, cmdline;
  int64_t root_pid = 0;
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  int64_t processes = 0, workers = 0;
  std::optional<double> steps_per_second, data_wait_share, read_bytes_per_second, workers_cpu;
  int64_t max_d_state = 0;
  struct Device {
    std::string name, via;
    int64_t open_files;
  };
  std::vector<Device> devices;
  struct Rank {
    int64_t rank = 0, pid = 0;
    std::string gpu;
    std::optional<double> steps_per_second, data_wait_share, read_bytes_per_second, gpu_util, gpu_work;
    int64_t max_d_state = 0;
  };
  std::vector<Rank> ranks;  // jobs of two or more ranks (schema 6)
};

std::optional<double> optionalDouble(const SQLite::Column& c) {
  return c.isNull() ? std::nullopt : std::optional<double>(c.getDouble());
}

std::vector<JobRow> readJobs(SQLite::Database& db) {
  std::vector<JobRow> jobs;
  const bool has_ranks = db.execAndGet("PRAGMA user_version").getInt() >= 6;
  SQLite::Statement q(db,
                      "SELECT job_id, job_key, coalesce(label,''), coalesce(labels,''), "
                      "coalesce(gpus,''), coalesce(cmdline,''), root_pid, started_ms, ended_ms "
                      "FROM jobs ORDER BY started_ms");
  while (q.executeStep()) {
    JobRow j;
    j.id = q.getColumn(0).getInt64();
    j.key = q.getColumn(1).getString();
    j.label = q.getColumn(2).getString();
    j.labels = q.getColumn(3).getString();
    j.gpus = q.getColumn(4).getString();
    j.cmdline = q.getColumn(5).getString();
    j.root_pid = q.getColumn(6).getInt64();
    j.started_ms = q.getColumn(7).getInt64();
    if (!q.getColumn(8).isNull()) j.ended_ms = q.getColumn(8).getInt64();
    jobs.push_back(std::move(j));
  }
  for (JobRow& j : jobs) {
    SQLite::Statement p(db,
                        "SELECT count(*), coalesce(sum(role = 'worker'), 0) FROM job_processes "
                        "WHERE job_id = ?");
    p.bind(1, j.id);
    if (p.executeStep()) {
      j.processes = p.getColumn(0).getInt64();
      j.workers = p.getColumn(1).getInt64();
    }
    // Steps per second over the job's sampled lifetime, and the share of the loop's time
    // spent waiting for data (NULL for jobs that never reported through the socket).
    SQLite::Statement s(
        db,
        "SELECT CASE WHEN count(steps) > 0 THEN total(steps) * 1000.0 / nullif(sum(interval_ms), 0) END, "
        "sum(data_wait_seconds) / nullif(sum(data_wait_seconds) + sum(step_seconds), 0), "
        "avg(read_bytes_per_second), avg(workers_cpu_ratio), coalesce(max(d_state_threads), 0) "
        "FROM job_samples WHERE job_id = ?");
    s.bind(1, j.id);
    if (s.executeStep()) {
      j.steps_per_second = optionalDouble(s.getColumn(0));
      j.data_wait_share = optionalDouble(s.getColumn(1));
      j.read_bytes_per_second = optionalDouble(s.getColumn(2));
      j.workers_cpu = optionalDouble(s.getColumn(3));
      j.max_d_state = s.getColumn(4).getInt64();
    }
    SQLite::Statement d(db,
                        "SELECT b.name, jd.via, jd.open_files_seen FROM job_devices jd "
                        "JOIN block_devices b USING (device_id) WHERE jd.job_id = ? "
                        "ORDER BY jd.via <> '', b.name");
    d.bind(1, j.id);
    while (d.executeStep()) {
      j.devices.push_back({d.getColumn(0).getString(), d.getColumn(1).getString(),
                           d.getColumn(2).getInt64()});
    }
    if (!has_ranks) continue;
    SQLite::Statement r(
        db,
        "SELECT r.rank, r.pid, coalesce(r.gpu_uuid, ''), "
        "CASE WHEN count(s.steps) > 0 THEN total(s.steps) * 1000.0 / nullif(sum(s.interval_ms), 0) END, "
        "sum(s.data_wait_seconds) / nullif(sum(s.data_wait_seconds) + sum(s.step_seconds), 0), "
        "avg(s.read_bytes_per_second), coalesce(max(s.d_state_threads), 0), avg(s.gpu_util_percent), "
        "avg(s.gpu_work_percent) FROM job_ranks r LEFT JOIN rank_samples s USING (job_id, rank) "
        "WHERE r.job_id = ? GROUP BY r.rank ORDER BY r.rank");
    r.bind(1, j.id);
    while (r.executeStep()) {
      JobRow::Rank k;
      k.rank = r.getColumn(0).getInt64();
      k.pid = r.getColumn(1).getInt64();
      k.gpu = r.getColumn(2).getString();
      k.steps_per_second = optionalDouble(r.getColumn(3));
      k.data_wait_share = optionalDouble(r.getColumn(4));
      k.read_bytes_per_second = optionalDouble(r.getColumn(5));
      k.max_d_state = r.getColumn(6).getInt64();
      k.gpu_util = optionalDouble(r.getColumn(7));
      k.gpu_work = optionalDouble(r.getColumn(8));
      j.ranks.push_back(std::move(k));
    }
  }
  return jobs;
}

std::string devicesText(const JobRow& j) {
  std::string out;
  for (const auto& d : j.devices) {
    out += (out.empty() ? "" : ", ") + d.name + (d.via.empty() ? "" : " (under " + d.via + ")");
  }
  return out.empty() ? "-" : out;
}

template <typename T>
nlohmann::json orNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

int runJobs(const JobsArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultDatabasePath().string() : args.db;
  std::vector<JobRow> jobs;
  try {
    SQLite::Database db = storage::openForReading(path, 2, "job tables");
    jobs = readJobs(db);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch jobs: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& j : jobs) {
      nlohmann::json devices = nlohmann::json::array();
      for (const auto& d : j.devices) {
        devices.push_back({{"device", d.name}, {"via", d.via}, {"open_files_seen", d.open_files}});
      }
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& k : j.ranks) {
        ranks.push_back({{"rank", k.rank}, {"pid", k.pid}, {"gpu", k.gpu},
                         {"steps_per_second", orNull(k.steps_per_second)},
                         {"data_wait_share", orNull(k.data_wait_share)},
                         {"mean_read_bytes_per_second", orNull(k.read_bytes_per_second)},
                         {"mean_gpu_util_percent", orNull(k.gpu_util)}, {"mean_gpu_work_percent", orNull(k.gpu_work)},
                         {"max_d_state_threads", k.max_d_state}});
      }
      out.push_back({{"job_id", j.id}, {"key", j.key}, {"label", j.label}, {"labels", j.labels}, {"ranks", ranks},
                     {"cmdline", j.cmdline}, {"root_pid", j.root_pid}, {"gpus", j.gpus},
                     {"started_ms", j.started_ms}, {"ended_ms", orNull(j.ended_ms)},
                     {"processes", j.processes}, {"workers", j.workers},
                     {"steps_per_second", orNull(j.steps_per_second)},
                     {"data_wait_share", orNull(j.data_wait_share)},
                     {"mean_read_bytes_per_second", orNull(j.read_bytes_per_second)},
                     {"mean_workers_cpu_ratio", orNull(j.workers_cpu)},
                     {"max_d_state_threads", j.max_d_state}, {"devices", devices}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  if (jobs.empty()) {
    std::cout << "no jobs recorded in " << path << "\n";
    return 0;
  }
  for (const auto& j : jobs) {
    std::cout << fmt::format("job {}  {}  ({})\n", j.id, j.label, j.key);
    std::cout << fmt::format("  span        {} .. {}\n", timeText(j.started_ms),
                             j.ended_ms ? timeText(*j.ended_ms) : std::string("running (or agent stopped first)"));
    if (!j.labels.empty()) std::cout << "  labels      " << j.labels << "\n";
    std::cout << "  gpus        " << (j.gpus.empty() ? "-" : j.gpus) << "\n";
    std::cout << fmt::format("  processes   {} ({} workers), root pid {}\n", j.processes, j.workers, j.root_pid);
    std::cout << "  reads from  " << devicesText(j) << "\n";
    std::cout << "  steps/s     "
              << (j.steps_per_second ? fmt::format("{:.2f}", *j.steps_per_second) : "- (no dataloader reports)") << "\n";
    std::cout << "  data wait   "
              << (j.data_wait_share ? fmt::format("{:.1f} % of loop time", *j.data_wait_share * 100) : "-") << "\n";
    std::cout << "  read        "
              << (j.read_bytes_per_second ? fmt::format("{:.1f} MB/s mean", *j.read_bytes_per_second / 1e6) : "-")
              << (j.max_d_state ? fmt::format(", up to {} threads in D state", j.max_d_state) : "") << "\n";
    if (!j.ranks.empty()) {
      std::cout << "  ranks       rank  pid      GPU            steps/s  data wait  read MB/s  GPU util  GPU work  D max\n";
      auto num = [](const std::optional<double>& v, double scale, const char* format) {
        return v ? fmt::format(fmt::runtime(format), *v * scale) : std::string("-");
      };
      for (const auto& k : j.ranks) {
        std::cout << fmt::format("              {:>4}  {:<8} {:<14} {:>7}  {:>9}  {:>9}  {:>8}  {:>8}  {:>5}\n", k.rank, k.pid,
                                 k.gpu.empty() ? "-" : k.gpu.substr(0, 12), num(k.steps_per_second, 1, "{:.2f}"),
                                 num(k.data_wait_share, 100, "{:.1f} %"), num(k.read_bytes_per_second, 1e-6, "{:.1f}"),
                                 num(k.gpu_util, 1, "{:.0f} %"), num(k.gpu_work, 1, "{:.1f} %"), k.max_d_state);
      }
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

CommandRunner addJobsCommand(CLI::App& app) {
  auto args = std::make_shared<JobsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "jobs", "List the training jobs in a database: span, GPUs, devices read, steps/s, data wait");
  cmd->add_option("--db", args->db, "Database file (default: the recorder's default)");
  cmd->add_flag("--json", args->json, "Print JSON instead of text");
  return [args] { return runJobs(*args); };
}

}  // namespace stallwatch::cli
