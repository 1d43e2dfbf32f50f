// `stallwatch export`: one job's (or one run's) slice of a recording, as a recording of its
// own, for a post-mortem across the nodes of a run (deploy/slurm/epilog collects one per node).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/time_arg.h"
#include "storage/export.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct ExportArgs {
  std::string db;
  std::optional<int64_t> job;
  std::string run_id;
  std::string since, until;
  std::string out;
};

int runExport(const ExportArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultReadingPath().string() : args.db;
  storage::TimeRange range;
  if (!parseTimeRange(args.since, args.until, range, "export")) return 2;
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    const auto jobs = args.job ? recording.jobs(args.job) : recording.jobsOfRun(args.run_id);
    if (jobs.empty()) {
      std::cerr << "stallwatch export: no job "
                << (args.job ? std::to_string(*args.job) : "of run '" + args.run_id + "'") << " in "
                << path << " (stallwatch jobs lists them)\n";
      return 1;
    }
    const auto result = storage::exportJobs(path, jobs, range, args.out);
    int64_t rows = 0;
    for (const auto& [table, n] : result.rows) rows += n;
    std::cerr << "exported " << jobs.size() << " job(s) of "
              << (result.hostname.empty() ? "?" : result.hostname) << ", " << rows << " rows over "
              << (result.to_ms - result.from_ms) / 1000 << " s, to " << args.out << "\n";
  } catch (const std::exception& e) {
    std::cerr << "stallwatch export: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

CommandRunner addExportCommand(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export",
                                     "Write one job's (or run's) slice of a recording to a new "
                                     "file: for a post-mortem across the nodes of a run");
  cmd->add_option("--db", args->db, "Database file (default: the recorder's default)");
  auto* job = cmd->add_option("--job", args->job, "The job (its id in `stallwatch jobs`)");
  auto* run =
      cmd->add_option("--run-id", args->run_id,
                      "The jobs of a run: SLURM_JOB_ID or TORCHELASTIC_RUN_ID, or a job key");
  job->excludes(run);
  cmd->add_option("--since", args->since, "From this time (as `report --since`)");
  cmd->add_option("--until", args->until, "Up to this time");
  cmd->add_option("-o,--output", args->out, "The file to write (must not exist)")->required();
  cmd->callback([job, run] {
    if (job->count() + run->count() == 0)
      throw CLI::ValidationError("--job or --run-id", "one of them is needed");
  });
  return [args] { return runExport(*args); };
}

}  // namespace stallwatch::cli
