#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/fleet_report.h"
#include "cli/report.h"
#include "cli/time_arg.h"
#include "common/text.h"
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
  bool force = false;  // --html may replace a file that exists
};

// The page, written with the intent stated: a new file (0640), never through a symbolic link
// and never over a file that exists unless FORCE; then a whole page replaces it (a temporary
// file renamed over the name: a link there is replaced, its target left alone).
bool writeHtml(const std::string& path, const std::string& page, bool force) {
  auto fail = [&](const std::string& why) {
    std::cerr << "stallwatch report: cannot write " << path << ": " << why << "\n";
    return false;
  };
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && !force) return fail("it exists (--force replaces it)");
  if (exists && S_ISDIR(st.st_mode)) return fail("it is a folder");
  std::string temp = force ? path + ".XXXXXX" : path;
  const int fd =
      force ? ::mkstemp(temp.data())
            : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (fd < 0) return fail(std::strerror(errno));
  if (force) ::fchmod(fd, 0640);
  size_t written = 0;
  while (written < page.size()) {
    const ssize_t n = ::write(fd, page.data() + written, page.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool ok = written == page.size() && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || (force && ::rename(temp.c_str(), path.c_str()) != 0)) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(temp.c_str());
    return fail(why);
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
                 render::renderFleetHtml(reports, inputs, "stallwatch report across nodes"),
                 args.force))
    return 1;
  if (args.json) {
    std::cout << render::renderFleetJson(reports, inputs)
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else if (args.html.empty()) {
    std::cout << common::printableLines(render::renderFleetText(reports, inputs));
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
    if (args.job && recording.jobs(args.job).empty()) {
      std::cerr << "stallwatch report: no job " << *args.job << " in " << path
                << " (`stallwatch jobs` lists them)\n";
      return 1;
    }
    reports = buildReports(recording, args.job, range);
    if (reports.empty() && !args.job) host = recording.hostSeries(range);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (!args.html.empty() &&
      !writeHtml(args.html, render::renderHtml(reports, "stallwatch report: " + path, &host),
                 args.force))
    return 1;
  if (args.json) {
    std::cout << render::renderJson(reports).dump(2, ' ', false,
                                                  nlohmann::json::error_handler_t::replace)
              << "\n";
  } else if (args.html.empty()) {
    std::cout << common::printableLines(reports.empty() ? render::renderHostText(host)
                                                        : render::renderText(reports));
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
  cmd->add_option("--html", args->html,
                  "Write a self-contained HTML page with a timeline to FILE (a new file, 0640; "
                  "never through a symbolic link)");
  cmd->add_flag("--force", args->force, "With --html: replace FILE if it exists");
  return [args] { return runReport(*args); };
}

}  // namespace stallwatch::cli
