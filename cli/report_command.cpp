#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/json_output.h"
#include "cli/logging.h"
#include "cli/time_arg.h"
#include "common/text.h"
#include "render/fleet.h"
#include "render/report.h"
#include "report/fleet_report.h"
#include "report/job_report.h"
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
  bool force = false;        // --html may replace a file that exists
  size_t memory_mib = 2048;  // across nodes: the run's series on the grid, at most
  // A run read from Prometheus (Thanos Query, Mimir) instead of recordings.
  std::string prometheus;
  std::string step;
  std::string deadline;
  std::string match;
  prometheus::ClientOptions client;
};

// The page, written with the intent stated: a new file (0640), never through a symbolic link
// and never over a file that exists unless FORCE; then a whole page replaces it (a temporary
// file renamed over the name: a link there is replaced, its target left alone).
bool writeHtml(const std::string& path, const std::string& page, bool force) {
  if (path == "-") {  // standard output, as every tool that writes a file takes "-"
    std::cout << page << std::flush;
    return static_cast<bool>(std::cout);
  }
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

// A run's report across nodes, as --html, --json or text say; 1 if the page cannot be written.
int printFleetReports(const ReportArgs& args, const std::vector<model::FleetReport>& reports,
                      const model::FleetInputs& inputs, const std::string& title) {
  if (!args.html.empty() &&
      !writeHtml(args.html, render::renderFleetHtml(reports, inputs, title), args.force))
    return 1;
  if (args.json) {
    printJson("report", render::renderFleetJson(reports, inputs));
  } else if (args.html.empty()) {
    std::cout << common::printableLines(render::renderFleetText(reports, inputs));
  }
  return 0;
}

// Several nodes' recordings: the run across them.
int runFleetReport(const ReportArgs& args, const storage::TimeRange& range) {
  if (args.job) {
    std::cerr << "stallwatch report: --job names a job of one recording; across several, pick "
                 "the run with --run-id\n";
    return 2;
  }
  model::FleetInputs inputs = report::recordingPaths(args.dbs);
  std::vector<model::FleetReport> reports;
  try {
    reports = report::buildFleetReports(inputs, args.run_id, range, args.memory_mib << 20,
                                        [](const std::string& status) {
                                          if (status.empty()) {
                                            clearStatusLine();
                                          } else {
                                            showStatusLine(status);
                                          }
                                        });
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: " << e.what() << "\n";
    return 1;
  }
  if (inputs.opened == 0) {
    if (inputs.problems.empty()) inputs.problems.push_back("no recording given");
    for (const auto& p : inputs.problems) std::cerr << "stallwatch report: " << p << "\n";
    return 1;
  }
  return printFleetReports(args, reports, inputs, "stallwatch report across nodes");
}

// The same, over the series the nodes' agents exported to a Prometheus-compatible server.
int runPrometheusReport(ReportArgs args, const storage::TimeRange& range) {
  auto refuse = [](const std::string& why) {
    std::cerr << "stallwatch report: " << why << "\n";
    return 2;
  };
  if (args.run_id.empty())
    return refuse(
        "--prometheus needs --run RUN_ID: the run label the agents export (slurm:ID, "
        "torchelastic:ID; `count by (run) (stallwatch_run_job_info)` lists them)");
  if (!args.dbs.empty()) return refuse("--prometheus and --db are two sources: give one");
  if (args.job) return refuse("--job names a job of one recording; with --prometheus, --run");
  prometheus::RunSelection selection;
  // A bare id as the file-based report takes it: SLURM_JOB_ID or TORCHELASTIC_RUN_ID alone.
  selection.run = args.run_id;
  selection.matchers = args.match;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  selection.until_ms = range.until_ms.value_or(now);
  selection.since_ms = range.since_ms.value_or(selection.until_ms - 24 * 3'600'000);
  if (!args.step.empty()) {
    const auto step = parseDuration(args.step);
    if (!step || *step < std::chrono::milliseconds(100))
      return refuse("--prometheus-step " + args.step +
                    ": a duration of 100ms or more (1s, 15s, 1m), the agents' scrape interval");
    selection.step_ms = std::chrono::duration_cast<std::chrono::milliseconds>(*step).count();
  }
  if (!args.deadline.empty()) {
    const auto deadline = parseDuration(args.deadline);
    if (!deadline || *deadline < std::chrono::seconds(1))
      return refuse("--prometheus-deadline " + args.deadline +
                    ": a duration of 1s or more (90s, 10m), for the whole report");
    args.client.deadline = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline);
  }
  if (args.client.insecure_skip_verify)
    std::cerr << "stallwatch report: not checking the server's TLS certificate "
                 "(--prometheus-insecure-skip-verify)\n";
  args.client.url = args.prometheus;
  std::vector<model::FleetReport> reports;
  model::FleetInputs inputs;
  try {
    prometheus::Client client(prometheus::httpTransport(args.client));
    // A long read says how far it is, on a terminal: requests answered, bytes, points.
    client.onAnswer([](const prometheus::QueryStats& s) {
      showStatusLine(
          fmt::format("reading from Prometheus: {} requests answered, {:.1f} MB, {} points",
                      s.requests, static_cast<double>(s.bytes) / 1e6, s.points));
    });
    reports = report::buildPrometheusFleetReport(client, selection);
    clearStatusLine();
    std::cerr << fmt::format(
        "read {} from {}: {} requests, {:.1f} MB, {} points, {:.1f} s waiting for answers\n",
        selection.run, common::printable(common::withoutUserinfo(args.prometheus)),
        client.stats().requests, static_cast<double>(client.stats().bytes) / 1e6,
        client.stats().points, client.stats().waited_s);
  } catch (const std::exception& e) {
    clearStatusLine();
    std::cerr << "stallwatch report: " << e.what() << "\n";
    return 1;
  }
  if (reports.empty()) {
    std::cerr << "stallwatch report: no series of run " << selection.run << " in "
              << common::printable(common::withoutUserinfo(args.prometheus))
              << " between the given times (the agents export it as the run "
              << "label of stallwatch_run_job_info)\n";
    return 1;
  }
  inputs.opened = reports.front().nodes.size();
  return printFleetReports(args, reports, inputs, "stallwatch report from Prometheus");
}

bool acrossNodes(const ReportArgs& args) {
  if (args.dbs.size() > 1 || !args.run_id.empty()) return true;
  if (args.dbs.empty()) return false;
  std::error_code ec;
  return std::filesystem::is_directory(args.dbs.front(), ec) ||
         args.dbs.front().find_first_of("*?[") != std::string::npos;
}

int runReport(const ReportArgs& args) {
  if (args.html == "-" && args.json) {
    std::cerr << "stallwatch report: --html - and --json would both go to standard output; "
                 "give --html a file\n";
    return 2;
  }
  storage::TimeRange range;
  if (!parseTimeRange(args.since, args.until, range, "report")) return 2;
  if (!args.prometheus.empty()) return runPrometheusReport(args, range);
  if (acrossNodes(args)) return runFleetReport(args, range);
  const std::string path =
      args.dbs.empty() ? storage::defaultReadingPath().string() : args.dbs.front();
  std::vector<model::JobReport> reports;
  model::HostReport host;  // what the devices did, when no job has samples in the range
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    if (args.job && recording.jobs(args.job).empty()) {
      std::cerr << "stallwatch report: no job " << *args.job << " in " << path
                << " (`stallwatch jobs` lists them)\n";
      return 1;
    }
    reports = report::buildJobReports(recording, args.job, range);
    if (reports.empty() && !args.job) host = report::buildHostReport(recording, range);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch report: cannot read " << path << ": " << e.what() << "\n";
    return 1;
  }
  if (!args.html.empty() &&
      !writeHtml(
          args.html,
          render::renderHtml(
              reports, "stallwatch report: " + std::filesystem::path(path).filename().string(),
              &host),
          args.force))
    return 1;
  if (args.json) {
    nlohmann::json body{{"jobs", render::renderJson(reports)}};
    if (reports.empty()) body["host_devices"] = render::hostDevicesJson(host);
    printJson("report", std::move(body));
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
  cmd->add_option("--run-id,--run", args->run_id,
                  "Across nodes: only this run (SLURM_JOB_ID, TORCHELASTIC_RUN_ID or a job key "
                  "as `jobs` lists it)");
  cmd->add_option("--memory", args->memory_mib,
                  "Across nodes: the most the run's series may take, in MiB (about 3 a node-day "
                  "at 1 s); a run too long or too wide for it is judged on a coarser grid, said "
                  "in the report")
      ->capture_default_str()
      ->check(CLI::Range(size_t{16}, size_t{1} << 30));
  cmd->add_option("--since", args->since,
                  "From this time: ISO 8601 (2026-11-22, 2026-11-22T02:00Z, an offset +02:00; the "
                  "local zone without one, as `date -d` reads it, or UTC with --utc), "
                  "epoch seconds or milliseconds, or a duration ago (2h, 1h30m)");
  cmd->add_option("--until", args->until, "Up to this time (same forms)");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_option("--html", args->html,
                  "Write a self-contained HTML page with a timeline to FILE (a new file, 0640; "
                  "never through a symbolic link; '-': standard output)");
  cmd->add_flag("--force", args->force, "With --html: replace FILE if it exists");
  cmd->add_option("--prometheus", args->prometheus,
                  "Read the run (--run) from this Prometheus, Thanos Query or Mimir (its "
                  "Prometheus API base URL, e.g. http://prom:9090 or "
                  "https://mimir/prometheus) instead of recordings; --since/--until bound the "
                  "search (default: the last 24 h)")
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-step", args->step,
                  "The agents' scrape interval (default: found from the samples' spacing)")
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-match", args->match,
                  "More label matchers for every selector, e.g. cluster=\"a\" (a run id seen "
                  "in two clusters behind one Thanos)")
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-bearer-token-file", args->client.bearer_token_file,
                  "Send the token in FILE as \"Authorization: Bearer\"")
      ->check(CLI::ExistingFile)
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-ca-file", args->client.ca_file,
                  "TLS: the CA certificates that sign the server's")
      ->check(CLI::ExistingFile)
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-cert-file", args->client.cert_file, "TLS: a client certificate")
      ->check(CLI::ExistingFile)
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-key-file", args->client.key_file, "TLS: its private key")
      ->check(CLI::ExistingFile)
      ->group("Across nodes, from Prometheus");
  cmd->add_flag("--prometheus-insecure-skip-verify", args->client.insecure_skip_verify,
                "TLS: accept any certificate")
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-deadline", args->deadline,
                  "The whole report's time to talk to the server (default 10m): no request "
                  "starts after it, and each gets at most what is left")
      ->group("Across nodes, from Prometheus");
  cmd->add_option("--prometheus-header", args->client.headers,
                  "Send this header with every request, \"Name: value\" (Mimir's "
                  "\"X-Scope-OrgID: TENANT\"); may be repeated")
      ->group("Across nodes, from Prometheus");
  return [args] { return runReport(*args); };
}

}  // namespace stallwatch::cli
