// `stallwatch replay`: drives the live half of the agent (correlator, hook, webhook, metrics)
// with a recording instead of the running system, as fast as it can or at a chosen speed.
// For trying a hook or an alerting setup against a real stall, and for the live tests.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "agent/incident_payload.h"
#include "agent/live_pipeline.h"
#include "agent/recorder.h"
#include "cli/commands.h"
#include "cli/live_options.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

struct ReplayArgs {
  std::string db;
  double speed = 0;
  std::string metrics_file;
  LiveArgs live;
};

// The page a scrape would have got after the last interval: "-" for stdout.
bool writeMetricsPage(const std::string& path, const std::string& page) {
  if (path == "-") {
    std::cout << page << std::flush;
    return true;
  }
  std::ofstream out(path, std::ios::trunc);
  out << page;
  if (out.flush()) return true;
  std::cerr << "stallwatch replay: cannot write " << path << ": " << std::strerror(errno) << "\n";
  return false;
}

int runReplay(const ReplayArgs& args) {
  auto options = toLiveOptions(args.live, "replay");
  if (!options) return 2;
  options->keep_metrics = !args.metrics_file.empty();
  try {
    auto recording = storage::Recording::open(args.db);
    agent::LivePipeline live(*options);
    if (auto* server = live.metricsServer()) {
      server->serveOnOwnThread();  // this loop sleeps between batches
      std::cerr << "metrics on port " << server->port() << "\n";
    }
    // Each event as one JSON line on stdout, as a hook would receive it.
    live.onEvent([&](const model::IncidentEvent& e) {
      std::cout << agent::incidentJson(e, options->host) << std::endl;
    });
    uint64_t intervals = 0;
    const auto started = std::chrono::steady_clock::now();
    std::optional<int64_t> first_ms;
    const auto stats = recording.replay([&](collectors::SampleBatch& batch) {
      if (args.speed > 0) {
        // Paced: the recording's own time, divided by the speed.
        if (!first_ms) {
          first_ms = batch.wall_time_ms;
          // Where the recording's clock lands on the wall clock: what a reader of the scraped
          // series needs to find the recording's moments in them.
          const auto started_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::system_clock::now().time_since_epoch() -
              (std::chrono::steady_clock::now() - started));
          std::cerr << "replaying from " << *first_ms << " ms at " << started_ms.count()
                    << " ms (Unix time), speed " << args.speed << "\n";
        }
        const auto due =
            started + std::chrono::duration<double, std::milli>(
                          static_cast<double>(batch.wall_time_ms - *first_ms) / args.speed);
        std::this_thread::sleep_until(due);
      }
      ++intervals;
      live.onBatch(batch, nullptr, {intervals, 0, nullptr, {}});
      return true;
    });
    live.drain(std::chrono::seconds(60));
    if (!args.metrics_file.empty() && !writeMetricsPage(args.metrics_file, live.metricsPage()))
      return 1;
    std::cerr << "replayed " << stats.batches << " intervals\n";
    logLiveSummary(live.eventCounts(), live.notifierStats(), live.hookStats(), live.webhookStats());
  } catch (const storage::StoreError& e) {
    std::cerr << "stallwatch replay: cannot read " << args.db << ": " << e.what() << "\n";
    return 1;
  } catch (const std::runtime_error& e) {
    std::cerr << "stallwatch replay: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

CommandRunner addReplayCommand(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Run a recording through the live correlator, hooks, webhook and metrics endpoint");
  cmd->add_option("--db", args->db, "The recording to replay")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option(
         "--speed", args->speed,
         "Replay at this multiple of the recording's pace (1: as recorded); 0: as fast as possible")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--metrics-file", args->metrics_file,
                  "At the end, write the metrics page a scrape would get to FILE ('-': standard "
                  "output)");
  addLiveOptions(*cmd, args->live);
  return [args] { return runReplay(*args); };
}

}  // namespace stallwatch::cli
