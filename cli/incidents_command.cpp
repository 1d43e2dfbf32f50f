#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/report.h"
#include "cli/time_arg.h"
#include "common/text.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct IncidentsArgs {
  std::string db;
  bool recompute = false;
  bool json = false;
  std::optional<int64_t> job;
};

int runIncidents(const IncidentsArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultDatabasePath().string() : args.db;
  try {
    // A stallwatch recording of a version this one reads, before anything is written to it:
    // --recompute must not install stallwatch's tables into someone else's SQLite file.
    auto checked = storage::Recording::open(path);
    if (args.job && checked.jobs(args.job).empty()) {
      std::cerr << "stallwatch incidents: no job " << *args.job << " in " << path
                << " (`stallwatch jobs` lists them)\n";
      return 1;
    }
    if (args.recompute) {
      // Through Store::open, so that an older DB gains the incidents table first.
      auto store = storage::Store::open(path);
      auto recording = storage::Recording::open(path);
      size_t jobs = 0, found = 0;
      for (const auto& job : recording.jobs(args.job)) {
        auto series = recording.jobSeries(job, {});
        const auto analysis =
            correlator::analyzeJobOnHost(series, [&](model::JobSeries& s, const auto& windows) {
              recording.addOtherDevices(job, s, windows);
            });
        store->replaceIncidents(job.job_id, "recompute", analysis.incidents, nowMs());
        ++jobs;
        found += analysis.incidents.size();
      }
      std::cerr << "recomputed " << jobs << " job(s): " << found << " incident(s)\n";
    }
    const auto incidents =
        storage::Recording::open(path, storage::Recording::Needs::kIncidents).incidents(args.job);
    if (args.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& s : incidents) {
        nlohmann::json j = render::incidentJson(s.incident);
        j["incident_id"] = s.incident_id;
        j["job_id"] = s.job_id;
        j["job"] = s.job_label;
        j["source"] = s.source;
        j["detected_ms"] = s.detected_ms;
        out.push_back(j);
      }
      std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }
    if (incidents.empty()) std::cout << "no incidents in " << path << "\n";
    for (const auto& s : incidents) {
      std::cout << "#" << s.incident_id << "  job " << s.job_id << " "
                << common::printable(s.job_label) << "\n    "
                << common::printableLines(render::describeIncident(s.incident)) << "  [" << s.source
                << "]\n";
      if (const std::string ranks = correlator::rankSummary(s.incident); !ranks.empty()) {
        std::cout << "    " << ranks << "\n";
      }
      for (const auto& e : s.incident.evidence) {
        if (!e.supports) continue;
        std::cout << "      * " << common::printable(e.signal) << ": " << e.baseline << " -> "
                  << e.during << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "stallwatch incidents: " << path << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

CommandRunner addIncidentsCommand(CLI::App& app) {
  auto args = std::make_shared<IncidentsArgs>();
  CLI::App* cmd =
      app.add_subcommand("incidents", "List the stalls found in a database, with their causes");
  cmd->add_option("--db", args->db, "Database file (default: the recorder's default)");
  cmd->add_flag("--recompute", args->recompute,
                "Recompute every job's incidents from its samples and store them first");
  cmd->add_option("--job", args->job, "Only this job (its id in `stallwatch jobs`)");
  cmd->add_flag("--json", args->json, "Print JSON");
  return [args] { return runIncidents(*args); };
}

}  // namespace stallwatch::cli
