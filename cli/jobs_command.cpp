#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "common/text.h"
#include "render/report.h"
#include "report/job_report.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct JobsArgs {
  std::string db;
  bool json = false;
};

struct JobRow {
  storage::JobRecord job;
  storage::JobActivity activity;
  std::string gpus;           // the job's GPU UUIDs as listed: comma-separated
  model::JobVerdict limiter;  // what limited it over its run, outside its incidents
};

std::vector<JobRow> readJobs(storage::Recording& recording) {
  std::vector<JobRow> rows;
  for (auto& job : recording.jobs()) {
    JobRow row;
    row.activity = recording.activity(job);
    row.limiter = report::standingVerdict(recording, job);
    for (const auto& uuid : job.gpu_uuids) row.gpus += (row.gpus.empty() ? "" : ",") + uuid;
    row.job = std::move(job);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string devicesText(const storage::JobActivity& j) {
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
  const std::string path = args.db.empty() ? storage::defaultReadingPath().string() : args.db;
  std::vector<JobRow> jobs;
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    jobs = readJobs(recording);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch jobs: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [job, j, gpus, limiter] : jobs) {
      nlohmann::json devices = nlohmann::json::array();
      for (const auto& d : j.devices) {
        devices.push_back({{"device", d.name}, {"via", d.via}, {"open_files_seen", d.open_files}});
      }
      nlohmann::json ranks = nlohmann::json::array();
      for (const auto& k : j.ranks) {
        ranks.push_back({{"rank", k.rank},
                         {"pid", k.pid},
                         {"gpu", k.gpu},
                         {"steps_per_second", orNull(k.steps_per_second)},
                         {"data_wait_share", orNull(k.data_wait_share)},
                         {"mean_read_bytes_per_second", orNull(k.read_bytes_per_second)},
                         {"mean_gpu_util_percent", orNull(k.gpu_util)},
                         {"mean_gpu_work_percent", orNull(k.gpu_work)},
                         {"max_d_state_threads", k.max_d_state}});
      }
      out.push_back({{"job_id", job.job_id},
                     {"key", job.key},
                     {"label", job.label},
                     {"labels", job.labels},
                     {"ranks", ranks},
                     {"cmdline", job.cmdline},
                     {"root_pid", job.root_pid},
                     {"gpus", gpus},
                     {"start_ms", job.started_ms},
                     {"end_ms", orNull(job.ended_ms)},
                     {"processes", j.processes},
                     {"workers", j.workers},
                     {"steps_per_second", orNull(j.steps_per_second)},
                     {"data_wait_share", orNull(j.data_wait_share)},
                     {"mean_read_bytes_per_second", orNull(j.read_bytes_per_second)},
                     {"mean_workers_cpu_ratio", orNull(j.workers_cpu)},
                     {"max_d_state_threads", j.max_d_state},
                     {"limiter", render::limiterJson(limiter.verdict)},
                     {"devices", devices}});
    }
    printJson("jobs", {{"jobs", std::move(out)}});
    return 0;
  }
  if (jobs.empty()) {
    std::cout << "no jobs recorded in " << path << "\n";
    return 0;
  }
  for (const auto& [job, j, gpus, limiter] : jobs) {
    std::cout << fmt::format("job {}  {}  ({})\n", job.job_id, common::printable(job.label),
                             common::printable(job.key));
    std::cout << fmt::format("  span        {} .. {}\n", render::timeText(job.started_ms),
                             job.ended_ms ? render::timeText(*job.ended_ms)
                                          : std::string("running (or agent stopped first)"));
    if (!job.labels.empty()) std::cout << "  labels      " << common::printable(job.labels) << "\n";
    std::cout << "  gpus        " << (gpus.empty() ? "-" : gpus) << "\n";
    std::cout << fmt::format("  processes   {} ({} workers), root pid {}\n", j.processes, j.workers,
                             job.root_pid);
    std::cout << "  reads from  " << devicesText(j) << "\n";
    std::cout << "  steps/s     "
              << (j.steps_per_second ? fmt::format("{:.2f}", *j.steps_per_second)
                                     : "- (no dataloader reports)")
              << "\n";
    std::cout << "  data wait   "
              << (j.data_wait_share
                      ? fmt::format("{:.1f} % of loop time over the whole run, incidents included",
                                    *j.data_wait_share * 100)
                      : "-")
              << "\n";
    std::cout << "  read        "
              << (j.read_bytes_per_second
                      ? fmt::format("{:.1f} MB/s mean", *j.read_bytes_per_second / 1e6)
                      : "-")
              << (j.max_d_state ? fmt::format(", up to {} threads in D state", j.max_d_state) : "")
              << "\n";
    std::cout << "  limiter     " << limiter.words << "\n";
    if (!j.ranks.empty()) {
      std::cout << "  ranks       (means over the whole run)\n"
                   "              rank  pid      GPU            steps/s  data wait  read MB/s  GPU "
                   "util  GPU work  D max\n";
      auto num = [](const std::optional<double>& v, double scale, const char* format) {
        return v ? fmt::format(fmt::runtime(format), *v * scale) : std::string("-");
      };
      for (const auto& k : j.ranks) {
        std::cout << fmt::format(
            "              {:>4}  {:<8} {:<14} {:>7}  {:>9}  {:>9}  {:>8}  {:>8}  {:>5}\n", k.rank,
            k.pid, k.gpu.empty() ? "-" : k.gpu.substr(0, 12), num(k.steps_per_second, 1, "{:.2f}"),
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
