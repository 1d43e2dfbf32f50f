#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/report.h"
#include "cli/time_arg.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct ReportArgs {
  std::string db;
  std::optional<int64_t> job;
  std::string since, until;
  bool json = false;
  std::string html;
};

int runReport(const ReportArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultDatabasePath().string() : args.db;
  storage::TimeRange range;
  if (!parseTimeRange(args.since, args.until, range, "report")) return 2;
  std::vector<JobReport> reports;
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    reports = buildReports(recording, args.job, range);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (!args.html.empty()) {
    std::ofstream out(args.html, std::ios::trunc);
    out << renderHtml(reports, "stallwatch report: " + path);
    if (!out) {
      std::cerr << "stallwatch report: cannot write " << args.html << "\n";
      return 1;
    }
    std::cerr << "wrote " << args.html << "\n";
  }
  if (args.json) {
    std::cout << renderJson(reports).dump(2) << "\n";
  } else if (args.html.empty()) {
    std::cout << renderText(reports);
  }
  return 0;
}

}  // namespace

CommandRunner addReportCommand(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Post-mortem of recorded runs: goodput, stalls and their causes, device latency");
  cmd->add_option("--db", args->db, "Database file (default: the recorder's default)");
  cmd->add_option("--job", args->job, "Only this job (its id in `stallwatch jobs`)");
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
