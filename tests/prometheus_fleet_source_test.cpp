// The run across nodes as read from Prometheus (prometheus/fleet_source.h), against a fake server
// that answers each PromQL query the source asks from a table of two nodes' series: the nodes
// found, the step, each node's summary placed on the grid, and the server's bad values counted.
// The real server is in tests/test_live_e2e.py and bench/prometheus_fleet_scale.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "prometheus/client.h"
#include "prometheus/fleet_source.h"

namespace stallwatch::prometheus {
namespace {

using F = model::NodeFigure;

constexpr int64_t kStart = 1'699'999'200;  // seconds, on the hour
constexpr int64_t kStepS = 15;
constexpr int kSteps = 40;  // ten minutes

std::string decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

std::string param(const std::string& path, const std::string& name) {
  const size_t at = path.find(name + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 1;
  return path.substr(from, path.find('&', from) - from);
}

// One series of an answer: its labels and its value at each second T asked.
struct FakeSeries {
  std::map<std::string, std::string> labels;
  std::function<std::string(int64_t t)> value;  // "" for no point
};

std::string matrix(const std::vector<FakeSeries>& series, int64_t start, int64_t end,
                   int64_t step) {
  std::string out = R"({"status":"success","data":{"resultType":"matrix","result":[)";
  for (size_t k = 0; k < series.size(); ++k) {
    out += k ? "," : "";
    out += R"({"metric":{)";
    bool first = true;
    for (const auto& [name, value] : series[k].labels) {
      out += (first ? "\"" : ",\"") + name + "\":\"" + value + "\"";
      first = false;
    }
    out += R"(},"values":[)";
    bool any = false;
    for (int64_t t = start; t <= end; t += step) {
      const std::string v = series[k].value(t);
      if (v.empty()) continue;
      out += (any ? "," : "") + std::string("[") + std::to_string(t) + ",\"" + v + "\"]";
      any = true;
    }
    out += "]}";
  }
  return out + "]}}";
}

class FakeFleetServer : public Transport {
 public:
  explicit FakeFleetServer(std::function<std::vector<FakeSeries>(const std::string&)> answer)
      : answer_(std::move(answer)) {}
  std::string get(const std::string& path) override {
    const std::string query = decoded(param(path, "query"));
    asked.push_back(query);
    const auto start = static_cast<int64_t>(std::stod(param(path, "start")));
    const auto end = static_cast<int64_t>(std::stod(param(path, "end")));
    const auto step = std::max<int64_t>(1, static_cast<int64_t>(std::stod(param(path, "step"))));
    return matrix(answer_(query), start, end, step);
  }
  std::vector<std::string> asked;

 private:
  std::function<std::vector<FakeSeries>(const std::string&)> answer_;
};

bool has(const std::string& query, const char* part) {
  return query.find(part) != std::string::npos;
}

std::map<std::string, std::string> nodeLabels(int n) {
  return {{"instance", "n" + std::to_string(n) + ":9101"},
          {"training_job", "slurm:7"},
          {"node", "n" + std::to_string(n)}};
}

// Two nodes of 8 ranks each run slurm:7 for ten minutes, scraped every 15 s. Node 1's ranks
// report; node 2's do not (no RANK in its environment). The server also holds a value no agent
// exports (node 1's steps at -4 once) and two scrape jobs of node 2 that disagree once.
std::vector<FakeSeries> answer(const std::string& q) {
  const auto during = [](int64_t t) { return t >= kStart && t < kStart + kSteps * kStepS; };
  auto constant = [during](const char* v) {
    return [during, v](int64_t t) { return during(t) ? std::string(v) : std::string(); };
  };
  std::vector<FakeSeries> out;
  if (has(q, "max by (run, node, instance, training_job, world_size)")) {
    for (int n : {1, 2}) {
      auto labels = nodeLabels(n);
      labels["run"] = "slurm:7";
      labels["world_size"] = "16";
      out.push_back({labels, constant("1")});
    }
  } else if (has(q, "max by (node, rank)") && has(q, "stallwatch_rank_gpu_utilization_ratio")) {
    for (int r = 0; r < 8; ++r)
      out.push_back({{{"node", "n1"}, {"rank", std::to_string(r)}}, constant("1")});
  } else if (has(q, "count_over_time")) {
    const auto w = std::stoll(q.substr(q.find('[') + 1));
    const std::string per = std::to_string(w / kStepS);
    for (int n : {1, 2}) out.push_back({nodeLabels(n), [per](int64_t) { return per; }});
  } else if (has(q, "max by (node) (stallwatch_run_job_info")) {
    for (int n : {1, 2}) out.push_back({{{"node", "n" + std::to_string(n)}}, constant("1")});
  } else if (has(q, "stallwatch_job_steps_per_second{")) {
    out.push_back({nodeLabels(1), [during](int64_t t) {
                     if (!during(t)) return std::string();
                     return t == kStart + 5 * kStepS ? std::string("-4") : std::string("4");
                   }});
    out.push_back({nodeLabels(2), constant("3.5")});
  } else if (has(q, "stallwatch_job_gpu_utilization_ratio{")) {
    out.push_back({nodeLabels(1), constant("0.9")});
    auto second = nodeLabels(2);
    out.push_back({second, constant("0.5")});
    second["job"] = "stallwatch-2";  // another scrape job of the same agent
    out.push_back({second, [during](int64_t t) {
                     if (!during(t)) return std::string();
                     return t == kStart + 7 * kStepS ? std::string("0.25") : std::string("0.5");
                   }});
  } else if (has(q, "min by (node) (stallwatch_rank_gpu_utilization_ratio")) {
    out.push_back({{{"node", "n1"}}, constant("0.8")});
  } else if (has(q, "stallwatch_job_gpus{")) {
    out.push_back({nodeLabels(1), constant("8")});
  }
  return out;
}

TEST(FleetSource, EachNodesSummaryIsPlacedOnTheRunsStepsAndBadValuesAreCounted) {
  auto transport = std::make_unique<FakeFleetServer>(answer);
  FakeFleetServer& server = *transport;
  Client client(std::move(transport));
  RunSelection selection;
  selection.run = "slurm:7";
  selection.since_ms = (kStart - 600) * 1000;
  selection.until_ms = (kStart + kSteps * kStepS + 600) * 1000;
  FleetSource source(client, selection);
  const FoundRun& run = source.run();
  ASSERT_EQ(run.nodes.size(), 2u);
  EXPECT_EQ(run.nodes[0].node, "n1");  // the node with the lowest rank first
  EXPECT_EQ(run.nodes[0].ranks.size(), 8u);
  EXPECT_TRUE(run.nodes[1].ranks.empty());
  EXPECT_EQ(run.step_ms, kStepS * 1000);
  EXPECT_EQ(run.world_size, 16);

  const auto summaries = source.summaries();
  ASSERT_EQ(summaries.size(), 2u);
  const model::NodeSampleColumns& n1 = summaries[0];
  const model::NodeSampleColumns& n2 = summaries[1];
  EXPECT_GE(n1.size(), static_cast<size_t>(kSteps));
  // Rates are turned into the interval's amount; ratios into percent.
  const size_t mid = n1.size() / 2;
  ASSERT_TRUE(n1.at(F::kSteps, mid));
  EXPECT_DOUBLE_EQ(*n1.at(F::kSteps, mid), 4.0 * kStepS);
  EXPECT_NEAR(*n1.at(F::kGpuUtilPercent, mid), 90, 1e-4);
  EXPECT_NEAR(*n1.at(F::kRankGpuUtilPercent, mid), 80, 1e-4);
  // A node whose ranks did not report: its job's figures stand for its slowest rank's.
  EXPECT_NEAR(*n2.at(F::kRankGpuUtilPercent, mid), 50, 1e-4);
  EXPECT_EQ(source.run().nodes[1].gpus, 0u);  // no GPU count and no ranks said
  EXPECT_EQ(source.run().nodes[0].gpus, 8u);
  // Figures no agent said are none, and held as nothing.
  EXPECT_FALSE(n1.at(F::kWorkersCpu, mid));
  EXPECT_FALSE(n1.at(F::kIoSome, mid));
  // The negative steps refused, the slot that two scrape jobs disagreed on kept empty.
  EXPECT_EQ(source.values().refused, 1u);
  EXPECT_EQ(source.values().disagreeing, 1u);
  size_t empty_steps = 0, empty_util = 0;
  for (size_t i = 0; i < n1.size(); ++i) empty_steps += n1.at(F::kSteps, i) ? 0 : 1;
  for (size_t i = 0; i < n2.size(); ++i) empty_util += n2.at(F::kGpuUtilPercent, i) ? 0 : 1;
  EXPECT_EQ(empty_steps, n1.size() - kSteps + 1);
  EXPECT_EQ(empty_util, n2.size() - kSteps + 1);
  // Each row read back as the fleet correlator reads a recording's.
  const model::NodeSample row = n1.sample(mid);
  EXPECT_EQ(row.interval_s, kStepS);
  EXPECT_DOUBLE_EQ(*row.steps, 4.0 * kStepS);
  EXPECT_FALSE(row.workers_cpu);
  // The summary asks one query a figure for every node, not one a node.
  size_t per_node = 0;
  for (const auto& q : server.asked) per_node += has(q, "instance=\"n1") ? 1 : 0;
  EXPECT_EQ(per_node, 0u);
  // ...and joins the job's series to its node itself, by the instance and job key discovered.
  EXPECT_NE(std::find(server.asked.begin(), server.asked.end(),
                      "stallwatch_job_steps_per_second{training_job=\"slurm:7\"}"),
            server.asked.end());
}

}  // namespace
}  // namespace stallwatch::prometheus
