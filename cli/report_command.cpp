#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/fleet_report.h"
#include "cli/report.h"
#include "cli/time_arg.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> dbs;
  std::optional<int64_t> job;
  std::string run_id;
  std::string since, until;
  bool json = false;
  std::string html;
};

bool writeHtml(const std::string& path, const std::string& page) {
  std::ofstream out(path, std::ios::trunc);
  out << page;
  if (!out) {
    std::cerr << "stallwatch report: cannot write " << path << "\n";
    return false;
  }
  std::cerr << "wrote " << path << "\n";
  return true;
}

// Several nodes' recordings: the run across them.
int runFleetReport(const ReportArgs& args, const storage::TimeRange& range) {
  if (args.job) {
    std::cerr << "stallwatch report: --job names a job of one recording; across several, pick "
                 "the run with --run-id\n";
    return 2;
  }
  render::FleetInputs inputs = recordingPaths(args.dbs);
  std::vector<render::FleetReport> reports;
  try {
    reports = buildFleetReports(inputs, args.run_id, range);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: " << e.what() << "\n";
    return 1;
  }
  if (inputs.opened == 0) {
    if (inputs.problems.empty()) inputs.problems.push_back("no recording given");
    for (const auto& p : inputs.problems) std::cerr << "stallwatch report: " << p << "\n";
    return 1;
  }
  if (!args.html.empty() &&
      !writeHtml(args.html,
                 render::renderFleetHtml(reports, inputs, "stallwatch report across nodes")))
    return 1;
  if (args.json) {
    std::cout << render::renderFleetJson(reports, inputs).dump(2) << "\n";
  } else if (args.html.empty()) {
    std::cout << render::renderFleetText(reports, inputs);
  }
  return 0;
}

bool acrossNodes(const ReportArgs& args) {
  if (args.dbs.size() > 1 || !args.run_id.empty()) return true;
  if (args.dbs.empty()) return false;
  std::error_code ec;
  return std::filesystem::is_directory(args.dbs.front(), ec) ||
         args.dbs.front().find_first_of("*?[") != std::string::npos;
}

int runReport(const ReportArgs& args) {
  storage::TimeRange range;
  if (!parseTimeRange(args.since, args.until, range, "report")) return 2;
  if (acrossNodes(args)) return runFleetReport(args, range);
  const std::string path =
      args.dbs.empty() ? storage::defaultDatabasePath().string() : args.dbs.front();
  std::vector<render::JobReport> reports;
  model::JobSeries host;  // what the devices did, when no job has samples in the range
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    reports = buildReports(recording, args.job, range);
    if (reports.empty() && !args.job) host = recording.hostSeries(range);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (!args.html.empty() &&
      !writeHtml(args.html, render::renderHtml(reports, "stallwatch report: " + path, &host)))
    return 1;
  if (args.json) {
    std::cout << render::renderJson(reports).dump(2) << "\n";
  } else if (args.html.empty()) {
    std::cout << (reports.empty() ? render::renderHostText(host) : render::renderText(reports));
  }
  return 0;
}

}  // namespace

CommandRunner addReportCommand(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Post-mortem of recorded runs: goodput, stalls and their causes, device latency");
  cmd->add_option("--db", args->dbs,
                  "Database file (default: the recorder's default). Several (or a directory of "
                  "*.db, or a glob): each node's recording or export of a run across nodes, "
                  "reported as one job naming the node that held it back");
  cmd->add_option("--job", args->job, "Only this job (its id in `stallwatch jobs`)");
  cmd->add_option("--run-id", args->run_id,
                  "Across nodes: only this run (SLURM_JOB_ID, TORCHELASTIC_RUN_ID or a job key "
                  "as `jobs` lists it)");
  cmd->add_option("--since", args->since,
                  "From this time: ISO 8601 (2026-11-22, 2026-11-22T02:00Z, an offset +02:00; UTC "
                  "without one), "
                  "epoch seconds or milliseconds, or a duration ago (2h, 1h30m)");
  cmd->add_option("--until", args->until, "Up to this time (same forms)");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_option("--html", args->html, "Write a self-contained HTML page with a timeline to FILE");
  return [args] { return runReport(*args); };
}

}  // namespace stallwatch::cli
