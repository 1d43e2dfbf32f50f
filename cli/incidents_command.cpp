#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/time_arg.h"
#include "common/text.h"
#include "correlator/stall_detector.h"
#include "render/report.h"
#include "report/job_report.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct IncidentsArgs {
  std::string db;
  bool recompute = false;
  bool live = false;
  bool json = false;
  std::optional<int64_t> job;
};

void print(const std::vector<storage::StoredIncident>& incidents, const std::string& path,
           bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : incidents) {
      nlohmann::json j = render::incidentJson(s.incident);
      j["incident_id"] = s.incident_id ? nlohmann::json(s.incident_id) : nlohmann::json();
      j["job_id"] = s.job_id;
      j["job"] = s.job_label;
      j["source"] = s.source;
      j["detected_ms"] = s.detected_ms ? nlohmann::json(s.detected_ms) : nlohmann::json();
      out.push_back(j);
    }
    printJson("incidents", {{"incidents", std::move(out)}});
    return;
  }
  if (incidents.empty()) std::cout << "no incidents in " << path << "\n";
  for (const auto& s : incidents) {
    std::cout << (s.incident_id ? "#" + std::to_string(s.incident_id) + "  " : std::string())
              << "job " << s.job_id << " " << common::printable(s.job_label) << "\n    "
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
}

int runIncidents(const IncidentsArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultReadingPath().string() : args.db;
  if (args.live && args.recompute) {
    std::cerr << "stallwatch incidents: --live shows what was paged, --recompute stores the "
                 "post-mortem's answer: give one\n";
    return 2;
  }
  try {
    // A stallwatch recording of a version this one reads, before anything is written to it:
    // --recompute must not install stallwatch's tables into someone else's SQLite file.
    auto recording = storage::Recording::open(path);
    if (args.job && recording.jobs(args.job).empty()) {
      std::cerr << "stallwatch incidents: no job " << *args.job << " in " << path
                << " (`stallwatch jobs` lists them)\n";
      return 1;
    }
    if (args.live) {  // what the agent paged, as it paged it
      auto stored =
          storage::Recording::open(path, storage::Recording::Needs::kIncidents).incidents(args.job);
      std::erase_if(stored, [](const auto& s) { return s.source != "live"; });
      print(stored, path, args.json);
      return 0;
    }
    auto found = report::postMortemIncidents(recording, args.job);
    if (args.recompute) {
      // Through Store::open, so that an older DB gains the incidents table first; each job's
      // earlier post-mortem rows replaced, never added beside.
      auto store = storage::Store::open(path);
      std::map<int64_t, std::vector<model::Incident>> by_job;
      for (const auto& job : recording.jobs(args.job)) by_job[job.job_id];
      for (const auto& s : found) by_job[s.job_id].push_back(s.incident);
      for (const auto& [job_id, incidents] : by_job)
        store->replaceIncidents(job_id, "recompute", incidents, nowMs());
      std::cerr << "recomputed " << by_job.size() << " job(s): " << found.size()
                << " incident(s)\n";
    }
    print(found, path, args.json);
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
      app.add_subcommand("incidents",
                         "List the stalls in a database with their causes: the post-mortem's "
                         "answer (as `report` gives it), or with --live what the agent paged");
  cmd->add_option("--db", args->db, "Database file (default: the recorder's default)");
  cmd->add_flag("--recompute", args->recompute,
                "Store the post-mortem's incidents in the database too (replacing earlier ones)");
  cmd->add_flag("--live", args->live,
                "What the agent paged while the job ran, as it paged it (its class at the time)");
  cmd->add_option("--job", args->job, "Only this job (its id in `stallwatch jobs`)");
  cmd->add_flag("--json", args->json, "Print JSON");
  return [args] { return runIncidents(*args); };
}

}  // namespace stallwatch::cli
