#include "report/fleet_report.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "common/text.h"
#include "correlator/fleet.h"
#include "correlator/fleet_limiters.h"
#include "correlator/postmortem.h"
#include "storage/runs_across_nodes.h"

namespace stallwatch::report {

using model::FleetInputs;
using model::FleetReport;

namespace {

namespace fs = std::filesystem;

// Tells PROGRESS (where given) how far the work is; "" when it is done.
void say(const Progress& progress, const std::string& status) {
  if (progress) progress(status);
}

bool isPattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// Node names as people know them: the host, or host/file where two recordings say the same
// host (one machine standing in for several nodes, or a node recorded twice).
std::vector<std::string> nodeNames(const std::vector<std::string>& hosts,
                                   const std::vector<std::string>& paths) {
  std::map<std::string, int> count;
  for (const auto& h : hosts) ++count[h];
  std::vector<std::string> names;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::string host = hosts[i].empty() ? "?" : hosts[i];
    names.push_back(count[hosts[i]] > 1 ? host + "/" + fs::path(paths[i]).stem().string() : host);
  }
  return names;
}

// A node's job in a run, with its ranks.
struct Pending {
  const storage::NodeJobRecord* job;
  std::vector<int32_t> ranks;
  int32_t lowest;
};

// Each judged node's standing verdict, as its own report judges it: its job's series read and
// judged over the range, a few nodes at once (one at a time a recording), each freed before the
// next. Past kNodeLimiterBudgetDays of recordings none is judged, and the report says so.
correlator::FleetLimiters nodeLimiters(const FleetReport& report,
                                       const std::vector<Pending>& pending,
                                       const std::vector<std::unique_ptr<storage::Recording>>& open,
                                       const storage::TimeRange& range, unsigned threads) {
  const auto& nodes = report.analysis.nodes;
  double node_days = 0;
  for (size_t j = 0; j < nodes.size(); ++j) {
    const double interval_s = static_cast<double>(report.analysis.interval_ms) / 1000.0;
    node_days += static_cast<double>(report.analysis.samples[j]) * interval_s / 86400.0;
  }
  if (node_days > correlator::kNodeLimiterBudgetDays) {
    correlator::FleetLimiters out;
    out.over_budget_node_days = node_days;
    return out;
  }
  std::vector<std::optional<model::LimiterVerdict>> verdicts(nodes.size());
  std::vector<std::mutex> per_recording(open.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < nodes.size(); j = next++) {
      const storage::NodeJobRecord& nj = *pending[nodes[j]].job;
      std::lock_guard<std::mutex> lock(per_recording[nj.recording]);
      storage::Recording& rec = *open[nj.recording];
      try {  // a recording that fails now (damaged past its first read) leaves its node unjudged
        model::JobSeries series = rec.jobSeries(nj.job, range);
        if (series.size() == 0) continue;
        auto summary =
            correlator::summarizeRecordedJob(series, [&](model::JobSeries& s, const auto& windows) {
              rec.addOtherDevices(nj.job, s, windows);
            });
        verdicts[j] = std::move(summary.limits.run);
      } catch (const std::exception&) {
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::min<size_t>(threads, nodes.size()); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return correlator::summarizeFleetLimiters(std::move(verdicts));
}

}  // namespace

FleetInputs recordingPaths(const std::vector<std::string>& args) {
  FleetInputs in;
  std::set<std::string> seen;
  auto add = [&](const std::string& p) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(p, ec);
    if (seen.insert(ec ? p : canonical.string()).second) in.paths.push_back(p);
  };
  for (const auto& arg : args) {
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(arg, ec)) {
        if (e.path().extension() != ".db") continue;
        // A link loop or a dangling link among them is said, and the rest reported.
        std::error_code entry_ec;
        const bool regular = e.is_regular_file(entry_ec);
        if (entry_ec) {
          in.problems.push_back(e.path().string() + ": " + entry_ec.message());
        } else if (regular) {
          found.push_back(e.path().string());
        }
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) in.problems.push_back(arg + ": a directory with no *.db file in it");
      for (const auto& f : found) add(f);
    } else if (isPattern(arg)) {
      glob_t g{};
      if (::glob(arg.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) add(g.gl_pathv[i]);
      } else {
        in.problems.push_back(arg + ": matches no file");
      }
      ::globfree(&g);
    } else {
      add(arg);
    }
  }
  return in;
}

std::vector<FleetReport> buildFleetReports(FleetInputs& inputs, const std::string& run_id,
                                           const storage::TimeRange& range, size_t max_series_bytes,
                                           const Progress& progress) {
  // Open every recording and list its jobs; one that cannot be read is said, not fatal: the
  // report then names the ranks it lacks.
  std::vector<std::unique_ptr<storage::Recording>> open;  // kept open for the analysis' reads
  std::vector<std::string> paths, hosts;
  std::vector<std::vector<storage::JobRecord>> jobs;
  for (const auto& path : inputs.paths) {
    // Many nodes' files take a while: which one, on a terminal.
    if (inputs.paths.size() > 1)
      say(progress,
          fmt::format("opening {} of {} recordings: {}", paths.size() + inputs.problems.size() + 1,
                      inputs.paths.size(), common::printable(path)));
    try {
      auto rec = std::make_unique<storage::Recording>(
          storage::Recording::open(path, storage::Recording::Needs::kJobTables));
      auto listed = run_id.empty() ? rec->jobs() : rec->jobsOfRun(run_id);
      hosts.push_back(rec->hostName());
      paths.push_back(path);
      jobs.push_back(std::move(listed));
      open.push_back(std::move(rec));
      ++inputs.opened;
    } catch (const std::exception& e) {
      inputs.problems.push_back(e.what());
    }
  }
  say(progress, "");
  const auto names = nodeNames(hosts, paths);
  std::vector<FleetReport> reports;
  for (auto& run : storage::groupRuns(jobs)) {
    FleetReport report;
    report.run = run;
    // Nodes in rank order, so that the first (the clock reference) is rank 0's where known.
    std::vector<Pending> pending;
    pending.reserve(run.jobs.size());
    for (const auto& nj : run.jobs) {
      auto ranks = open[nj.recording]->ranksOf(nj.job);
      const int32_t lowest =
          ranks.empty() ? INT32_MAX : *std::min_element(ranks.begin(), ranks.end());
      pending.push_back({&nj, std::move(ranks), lowest});
    }
    std::stable_sort(pending.begin(), pending.end(),
                     [](const Pending& a, const Pending& b) { return a.lowest < b.lowest; });
    std::vector<correlator::FleetNode> given;
    for (const Pending& p : pending) {
      const storage::JobRecord& job = p.job->job;
      given.push_back({names[p.job->recording], p.ranks,
                       static_cast<uint32_t>(job.gpu_uuids.size()),
                       static_cast<uint32_t>(job.root_pid),
                       job.gpu_uuids.empty() ? std::string() : job.gpu_uuids.front()});
    }
    // Each node read a row at a time, a few at once (one connection per recording), merged onto
    // the run's grid as it comes (correlator/fleet.h).
    std::atomic<size_t> reads{0};
    auto read = [&](size_t n, model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
      const storage::NodeJobRecord& nj = *pending[n].job;
      open[nj.recording]->nodeSamples(nj.job, range, fields, sink);
      // A run of many nodes takes a while: how far, on a terminal (a node may be read twice).
      say(progress, fmt::format("run {}: {} node reads done, {} nodes", common::printable(run.key),
                                ++reads, pending.size()));
    };
    auto window = [&](size_t n, int64_t from_ms, int64_t to_ms) {
      const storage::NodeJobRecord& nj = *pending[n].job;
      storage::Recording& rec = *open[nj.recording];
      model::JobSeries s = rec.jobSeries(nj.job, {from_ms, to_ms});
      if (s.size()) rec.addOtherDevices(nj.job, s, {{0, s.size() - 1}});
      return s;
    };
    correlator::FleetOptions options;
    options.max_series_bytes = max_series_bytes;
    options.threads = std::clamp(std::thread::hardware_concurrency(), 2u, 4u);
    report.analysis = correlator::analyzeFleet(given, read, window, run.world_size, options);
    say(progress, "");
    if (report.analysis.nodes.empty()) continue;
    for (size_t j = 0; j < report.analysis.nodes.size(); ++j) {
      const Pending& p = pending[report.analysis.nodes[j]];
      const storage::NodeJobRecord& nj = *p.job;
      report.nodes.push_back({names[nj.recording], paths[nj.recording], nj.job.job_id, p.ranks,
                              given[report.analysis.nodes[j]].gpu_count,
                              report.analysis.samples[j]});
    }
    // Two nodes at a time: each holds its whole series while judged.
    report.limiters = nodeLimiters(report, pending, open, range, 2);
    report.analysis.goodput =
        correlator::goodputOf(report.analysis.analysis, report.analysis.series,
                              correlator::standingVerdictOf(report.limiters));
    reports.push_back(std::move(report));
  }
  return reports;
}

std::vector<FleetReport> buildPrometheusFleetReport(prometheus::Client& client,
                                                    const prometheus::RunSelection& selection) {
  prometheus::FleetSource source(client, selection);
  const prometheus::FoundRun& found = source.run();
  if (found.nodes.empty()) return {};
  FleetReport report;
  report.run.key = found.run;
  report.run.from_ms = found.from_ms - found.shown_shift_ms;
  report.run.to_ms = found.to_ms - found.shown_shift_ms;
  report.run.world_size = found.world_size;
  // Each node's summary is read by the fleet correlator as a recording's is, a row at a time,
  // and freed once merged.
  std::vector<model::NodeSampleColumns> summaries = source.summaries();
  std::vector<correlator::FleetNode> nodes;
  std::vector<size_t> of_node;  // the index in FOUND.nodes of each node judged
  for (size_t i = 0; i < summaries.size(); ++i) {
    if (summaries[i].size() == 0) continue;
    const prometheus::RunNode& n = found.nodes[i];
    report.nodes.push_back({n.node, n.instance + " (" + n.training_job + ")", 0, n.ranks, n.gpus,
                            summaries[i].size()});
    of_node.push_back(i);
    nodes.push_back({n.node, n.ranks, n.gpus, 0, {}});
  }
  if (nodes.empty()) return {};
  auto read = [&](size_t n, model::NodeSampleFields fields, const model::NodeSampleSink& sink) {
    model::NodeSampleColumns& s = summaries[of_node[n]];
    for (size_t i = 0; i < s.size(); ++i) sink(s.sample(i));
    if (fields == model::NodeSampleFields::kAll) s = model::NodeSampleColumns{};
  };
  auto window = [&](size_t n, int64_t from_ms, int64_t to_ms) {
    return source.window(of_node[n], from_ms, to_ms);
  };
  correlator::FleetOptions options;
  options.threads = 1;  // in memory: nothing to wait for
  report.analysis = correlator::analyzeFleet(nodes, read, window, found.world_size, options);
  auto verdicts = source.limiters();
  std::vector<std::optional<model::LimiterVerdict>> judged;
  judged.reserve(of_node.size());
  for (const size_t i : of_node) judged.push_back(std::move(verdicts[i]));
  report.limiters = correlator::summarizeFleetLimiters(std::move(judged));
  report.analysis.goodput = correlator::goodputOf(report.analysis.analysis, report.analysis.series,
                                                  correlator::standingVerdictOf(report.limiters));
  report.step_ms = found.step_ms;
  report.data_step_ms = found.data_step_ms;
  report.server_values_refused = source.values().refused;
  report.server_values_disagreeing = source.values().disagreeing;
  std::vector<FleetReport> reports;
  reports.push_back(std::move(report));
  return reports;
}

}  // namespace stallwatch::report
