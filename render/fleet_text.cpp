// The post-mortem of a run across nodes as text and JSON: the nodes, their clocks, each stall
// with the node and rank that held the run back.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "render/fleet.h"
#include "render/report.h"

namespace stallwatch::render {
namespace {

std::string rankList(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j > i + 1    ? fmt::format("{}-{}", ranks[i], ranks[j])
                                        : j == i + 1 ? fmt::format("{}, {}", ranks[i], ranks[j])
                                                     : std::to_string(ranks[i]));
    i = j + 1;
  }
  return out;
}

std::string seconds(int64_t ms) {
  return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

// "node gpu-07, rank 13 (pid 4242, GPU-5c1c2662) held the job back: disk-slow loop0 (on vda),
// r_await_ms loop0 0.4 -> 80; the other 15 nodes waited 42.0 s (630 GPU-s)".
std::string whoHeldBack(const FleetReport& r, const model::FleetIncident& fi) {
  const model::Incident& inc = fi.incident;
  if (!fi.straggler_node) {
    std::string names;
    for (size_t n : fi.starved_nodes) names += (names.empty() ? "" : ", ") + r.nodes[n].name;
    return fmt::format("nodes {} starved alike: no single node held the job back{}", names,
                       fi.causes.empty() ? "" : "; on each: see below");
  }
  std::string out = "node " + r.nodes[*fi.straggler_node].name;
  if (inc.straggler) {
    // Read from Prometheus, a rank has no pid or GPU: its rank is what the series say.
    std::vector<std::string> what;
    if (inc.straggler->pid) what.push_back(fmt::format("pid {}", inc.straggler->pid));
    if (!inc.straggler->gpu.empty()) what.push_back(inc.straggler->gpu.substr(0, 12));
    out += fmt::format(", rank {}{}", inc.straggler->rank,
                       what.empty() ? "" : " (" + fmt::format("{}", fmt::join(what, ", ")) + ")");
  }
  out += std::string(" held the job back: ") + model::toString(inc.cls);
  if (!inc.device.empty()) {
    out +=
        " " + inc.device + (inc.physical_device.empty() ? "" : " (on " + inc.physical_device + ")");
  }
  if (fi.causes.empty()) out += " (its recording has no samples over the stall to explain it by)";
  for (const auto& e : fi.causes.empty() ? std::vector<model::EvidenceItem>{}
                                         : fi.causes.front().incident.evidence) {
    if (!e.supports || e.name.scope == model::EvidenceScope::kRank) continue;
    out += fmt::format(", {} {:.3g} -> {:.3g}", e.signal, e.baseline, e.during);
    break;
  }
  const size_t others = r.nodes.size() - 1;
  out += fmt::format("; the other {} node{} waited {:.1f} s ({:.1f} GPU-s)", others,
                     others == 1 ? "" : "s", fi.others_waited_s, fi.others_gpu_seconds);
  return out;
}

std::string clockText(const FleetReport& r) {
  const auto& a = r.analysis;
  std::string out;
  std::vector<std::string> unchecked;
  for (size_t i = 1; i < a.clocks.size(); ++i) {
    const auto& c = a.clocks[i];
    if (!c.checked) {
      unchecked.push_back(c.node);
    } else if (c.corrected) {
      out += fmt::format(
          "\n              {}'s clock is {} {} {}'s (by the job's {}, match {:.2f}); its "
          "samples were shifted back by it",
          c.node, seconds(std::llabs(c.offset_ms)), c.offset_ms > 0 ? "ahead of" : "behind",
          a.clocks[0].node, a.clock_signal, c.match);
    }
  }
  std::string head =
      a.clocks.size() < 2 ? "one node: nothing to compare"
      : unchecked.size() + 1 == a.clocks.size()
          ? "not checked: the job's " + a.clock_signal +
                " did not vary enough to line the nodes up by; times are each "
                "node's own clock"
          : fmt::format("checked by the job's {} against {}", a.clock_signal, a.clocks[0].node);
  if (!unchecked.empty() && unchecked.size() + 1 != a.clocks.size()) {
    std::string list;
    for (const auto& n : unchecked) list += (list.empty() ? "" : ", ") + n;
    out += "\n              not checkable for " + list + " (too little variation or overlap)";
  }
  if (out.empty() && unchecked.size() + 1 != a.clocks.size() && a.clocks.size() >= 2) {
    head += ": they agree within one interval";
  }
  return head + out;
}

// "input-cpu, waited for input 53 %, ~2.1x on offer": a node's standing verdict on one line.
std::string limiterLine(const model::LimiterVerdict& v) {
  std::string out = model::toString(v.limiter);
  if (v.wait_source != model::WaitSource::kNone || v.input_wait_gpu_seconds > 0)
    out += fmt::format(", waited for input {:.0f} %", v.input_wait_share * 100);
  const bool input = v.limiter != model::Limiter::kGpu && v.limiter != model::Limiter::kUnknown &&
                     v.limiter != model::Limiter::kHost;
  if (input && v.speedup >= 1.05) out += fmt::format(", ~{:.1f}x on offer", v.speedup);
  if (!v.device.empty()) out += " (" + v.device + ")";
  return out;
}

// The run's standing verdict: under which limiter most of its GPU time went, whose input was
// slowest, and the GPU-hours it waited for input by limiter.
std::string fleetLimiterText(const FleetReport& r) {
  const auto& l = r.limiters;
  if (l.over_budget_node_days) {
    return fmt::format(
        "  limiter     not judged node by node: {:.0f} node-days of recordings, past the {:.0f} a "
        "report judges (narrow it with --since/--until, or report a node's own recording)\n",
        *l.over_budget_node_days, model::kNodeLimiterBudgetDays);
  }
  if (!l.run_limiter) return "  limiter     not judged on any node\n";
  std::string out = fmt::format("  limiter     {} over most of the run's GPU time",
                                model::toString(*l.run_limiter));
  if (l.slowest_input_node)
    out += fmt::format("; slowest input: node {} ({:.0f} % waiting)",
                       r.nodes[*l.slowest_input_node].name,
                       l.nodes[*l.slowest_input_node]->input_wait_share * 100);
  std::string hours;
  for (size_t k = 0; k < l.wait_gpu_hours.size(); ++k) {
    if (l.wait_gpu_hours[k] <= 0) continue;
    hours += fmt::format("{}{} {:.3g}", hours.empty() ? "" : ", ",
                         model::toString(static_cast<model::Limiter>(k)), l.wait_gpu_hours[k]);
  }
  if (!hours.empty()) out += "\n              GPU-hours waiting for input, by limiter: " + hours;
  return out + "\n";
}

}  // namespace

std::string renderFleetText(const std::vector<FleetReport>& reports, const FleetInputs& inputs) {
  std::string out;
  for (const auto& p : inputs.problems) out += "not read: " + p + "\n";
  if (reports.empty()) {
    out +=
        "no run found across the recordings (a run is matched by its SLURM_JOB_ID, "
        "TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT at overlapping times)\n";
    return out;
  }
  for (const auto& r : reports) {
    const auto& a = r.analysis;
    const auto& s = a.series;
    out += fmt::format("run {}  across {} node{}", r.run.key, r.nodes.size(),
                       r.nodes.size() == 1 ? "" : "s");
    if (r.run.world_size) out += fmt::format(", world size {}", *r.run.world_size);
    out += "\n";
    if (r.data_step_ms > 0 && r.step_ms > r.data_step_ms) {
      out += fmt::format(
          "  coarse      read at a step of {}, coarser than the agents' samples ({}): a stall "
          "shorter than {} may be missed\n",
          seconds(r.step_ms), seconds(r.data_step_ms), seconds(r.step_ms));
    }
    if (r.server_values_refused + r.server_values_disagreeing > 0) {
      out += fmt::format(
          "  refused     {} of the server's values not finite or negative, {} where two series "
          "of one node disagreed (neither kept)\n",
          r.server_values_refused, r.server_values_disagreeing);
    }
    if (s.size() == 0) {
      out += "  no samples in the range\n\n";
      continue;
    }
    out += fmt::format("  span        {} .. {}  ({} intervals of {})\n", timeText(s.ts_ms.front()),
                       timeText(s.ts_ms.back()), s.size(), seconds(a.grid_ms));
    if (a.grid_ms != a.interval_ms) {
      out += fmt::format(
          "  coarsened   judged on intervals of {}, not the recordings' {}: the run's series "
          "({:.0f} MiB) kept within --memory\n",
          seconds(a.grid_ms), seconds(a.interval_ms),
          static_cast<double>(a.series_bytes) / (1 << 20));
    }
    for (const auto& n : r.nodes) {
      // A recording's job by its id; a node read from Prometheus by its scrape target and job.
      out += fmt::format(
          "  node        {:<20} ranks {:<10} {} GPU(s)  {}\n", n.name, rankList(n.ranks), n.gpus,
          n.job_id ? fmt::format("job {} in {}", n.job_id, n.path) : "from " + n.path);
      const size_t k = static_cast<size_t>(&n - r.nodes.data());
      if (k < r.limiters.nodes.size() && r.limiters.nodes[k])
        out += "              limiter " + limiterLine(*r.limiters.nodes[k]) + "\n";
    }
    if (!a.missing_ranks.empty()) {
      out += fmt::format(
          "  missing     rank{} {} of {} {} no recording here: not judged, and a stall {} caused "
          "shows as the other nodes starving alike\n",
          a.missing_ranks.size() == 1 ? "" : "s", rankList(a.missing_ranks),
          r.run.world_size.value_or(0), a.missing_ranks.size() == 1 ? "has" : "have",
          a.missing_ranks.size() == 1 ? "it" : "they");
    }
    out += "  clocks      " + clockText(r) + "\n";
    out += fmt::format("  judged by   {}\n",
                       a.analysis.progress_signal == model::ProgressSignal::kSteps
                           ? "dataloader steps per second, over every node"
                       : a.analysis.progress_signal == model::ProgressSignal::kGpuWork
                           ? "GPU work (GPM tensor/DRAM activity), over every node"
                           : "GPU utilisation of each node's least busy rank");
    out += "  goodput     " + goodputText(a.goodput, a.analysis) + "\n";
    out += fleetLimiterText(r);
    out += fmt::format("  stalls      {} ({} shorter blips not reported)\n", a.incidents.size(),
                       a.analysis.blips);
    for (const auto& fi : a.incidents) {
      out += "    " + describeIncident(fi.incident) + "\n";
      out += "      " + whoHeldBack(r, fi) + "\n";
      if (!fi.straggler_node) {
        for (const auto& c : fi.causes) {
          out += fmt::format("      on {}: {}{}\n", r.nodes[c.node].name,
                             model::toString(c.incident.cls),
                             c.incident.device.empty() ? "" : " " + c.incident.device);
        }
      }
      for (const auto& e : fi.incident.evidence) {
        if (e.baseline == 0 && e.during == 0 && !e.supports) continue;
        out += fmt::format("      {} {:<40} baseline {:>10.3f}  during {:>10.3f}\n",
                           e.supports ? "*" : " ", e.signal, e.baseline, e.during);
      }
    }
    out += "\n";
  }
  return out;
}

nlohmann::json renderFleetJson(const std::vector<FleetReport>& reports, const FleetInputs& inputs) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : reports) {
    const auto& a = r.analysis;
    nlohmann::json nodes = nlohmann::json::array();
    for (size_t k = 0; k < r.nodes.size(); ++k) {
      const auto& n = r.nodes[k];
      const bool judged = k < r.limiters.nodes.size() && r.limiters.nodes[k];
      nodes.push_back({{"node", n.name},
                       {"path", n.path},
                       {"job_id", n.job_id},
                       {"ranks", n.ranks},
                       {"gpus", n.gpus},
                       {"intervals", n.intervals},
                       {"limiter", judged ? limiterJson(*r.limiters.nodes[k]) : nlohmann::json()}});
    }
    nlohmann::json wait_hours = nlohmann::json::object();
    for (size_t k = 0; k < r.limiters.wait_gpu_hours.size(); ++k) {
      if (r.limiters.wait_gpu_hours[k] > 0)
        wait_hours[model::toString(static_cast<model::Limiter>(k))] = r.limiters.wait_gpu_hours[k];
    }
    const auto& slowest = r.limiters.slowest_input_node;
    const nlohmann::json limiters = {
        {"run", r.limiters.run_limiter ? nlohmann::json(model::toString(*r.limiters.run_limiter))
                                       : nlohmann::json()},
        {"slowest_input_node", slowest ? nlohmann::json(r.nodes[*slowest].name) : nlohmann::json()},
        {"input_wait_gpu_hours", wait_hours},
        {"over_budget_node_days", r.limiters.over_budget_node_days
                                      ? nlohmann::json(*r.limiters.over_budget_node_days)
                                      : nlohmann::json()}};
    nlohmann::json clocks = nlohmann::json::array();
    for (const auto& c : a.clocks) {
      clocks.push_back({{"node", c.node},
                        {"checked", c.checked},
                        {"offset_ms", c.offset_ms},
                        {"match", c.match},
                        {"corrected", c.corrected}});
    }
    nlohmann::json incidents = nlohmann::json::array();
    for (const auto& fi : a.incidents) {
      nlohmann::json j = incidentJson(fi.incident);
      j["straggler_node"] = fi.straggler_node ? nlohmann::json(r.nodes[*fi.straggler_node].name)
                                              : nlohmann::json(nullptr);
      nlohmann::json starved = nlohmann::json::array();
      for (size_t n : fi.starved_nodes) starved.push_back(r.nodes[n].name);
      j["nodes_starved"] = starved;
      j["others_waited_s"] = fi.others_waited_s;
      j["others_gpu_seconds"] = fi.others_gpu_seconds;
      nlohmann::json causes = nlohmann::json::array();
      for (const auto& c : fi.causes) {
        causes.push_back({{"node", r.nodes[c.node].name}, {"incident", incidentJson(c.incident)}});
      }
      j["on_nodes"] = causes;
      incidents.push_back(std::move(j));
    }
    const auto& s = a.series;
    runs.push_back(
        {{"run", r.run.key},
         {"world_size",
          r.run.world_size ? nlohmann::json(*r.run.world_size) : nlohmann::json(nullptr)},
         {"nodes", nodes},
         {"missing_ranks", a.missing_ranks},
         {"start_ms", s.size() ? nlohmann::json(s.ts_ms.front()) : nlohmann::json(nullptr)},
         {"end_ms", s.size() ? nlohmann::json(s.ts_ms.back()) : nlohmann::json(nullptr)},
         {"interval_ms", a.grid_ms},
         {"recorded_interval_ms", a.interval_ms},
         {"series_bytes", a.series_bytes},
         {"intervals", s.size()},
         {"clock_signal", a.clock_signal},
         {"clocks", clocks},
         {"progress_signal", model::toString(a.analysis.progress_signal)},
         {"gpus", s.gpu_count},
         {"goodput", a.goodput.share ? nlohmann::json(*a.goodput.share) : nlohmann::json()},
         {"goodput_unknown_because",
          a.goodput.share ? nlohmann::json() : nlohmann::json(a.goodput.unknown_because)},
         {"goodput_lost", goodputJson(a.goodput)},
         {"limiters", limiters},
         {"server_values_refused", r.server_values_refused},
         {"step_coarser_than_samples",
          r.data_step_ms > 0 && r.step_ms > r.data_step_ms
              ? nlohmann::json({{"step_ms", r.step_ms}, {"samples_ms", r.data_step_ms}})
              : nlohmann::json()},
         {"server_values_disagreeing", r.server_values_disagreeing},
         {"blips", a.analysis.blips},
         {"incidents", incidents}});
  }
  return {{"runs", runs}, {"not_read", inputs.problems}};
}

}  // namespace stallwatch::render
