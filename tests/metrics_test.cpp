#include "agent/metrics.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "agent/metrics_otlp.h"
#include "agent/metrics_server.h"
#include "agent/metrics_writer.h"
#include "common/text.h"

namespace stallwatch::agent {
namespace {

MetricsSnapshot sample() {
  MetricsSnapshot s;
  s.version = "0.1.0";
  s.last_sample_ms = 1'795'318'653'717;
  s.interval_seconds = 1;
  s.intervals = 42;
  collectors::DiskSample d;
  d.device = "loop0";
  d.rates.reads_per_second = 120;
  d.rates.r_await_ms = 76.5;
  d.rates.aqu_sz = 7.9;
  d.rates.util_percent = 99;
  s.disks.push_back(d);
  s.pressure.push_back({"io", 0.97, 0.5, {}, {}});
  collectors::JobSample j;
  j.key = "pid:960:38819";
  j.gpu_util_percent = 3;
  j.steps = 4;
  j.data_wait_seconds = 0.9;
  j.step_seconds = 0.1;
  s.jobs.push_back(j);
  s.stalls.push_back({1, "pid:960:38819", "python \"train\".py", model::StallClass::kDiskSlow,
                      "loop0", "vda", 1'795'318'653'000, ""});
  s.stalls.push_back({2, "torchelastic:ddp", "train_ddp.py", model::StallClass::kDiskSlow, "loop0",
                      "vda", 1'795'318'653'000, "1"});
  s.incidents_opened[0] = 1;
  s.collectors.push_back({"diskstats", 41, 1, 0, 0, std::chrono::microseconds(20),
                          std::chrono::microseconds(25), true});
  s.collectors.push_back({"gpu", 0, 0, 42, 0, {}, std::chrono::microseconds(3), false});
  s.hooks = HookStats{};
  s.hooks->timed_out = 2;
  s.health.push_back({"sda", "warning"});
  return s;
}

TEST(MetricsText, NumbersAreWrittenAsFmtsShortestFormWritesThem) {
  // The whole-number path must not change a byte of the page.
  std::vector<double> values = {
      0.0,         -0.0,  1.0,   -1.0,     7.0,          10.0,
      123456789.0, 1e15,  -1e15, 1e15 - 1, -(1e15 - 1),  4503599627370496.0,
      0.5,         -2.25, 1e-7,  1e21,     3.0e14 + 0.5, 1.7976931348623157e308};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(static_cast<double>(static_cast<int64_t>(rng() % 2000000000000000ULL) -
                                         1000000000000000LL));
    values.push_back(
        std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 80) - 60));
  }
  for (double v : values) {
    char buf[64];
    EXPECT_EQ(std::string(buf, agent::metrics_text::formatNumber(v, buf)), fmt::format("{}", v))
        << v;
  }
}

TEST(MetricsText, LabelValuesPlainOrEscapedAsTheFormatRequires) {
  std::string out;
  struct Sink {
    std::string& s;
    void append(const char* b, const char* e) { s.append(b, e); }
  } sink{out};
  agent::metrics_text::appendEscaped(std::string("loop0"), sink);
  agent::metrics_text::appendEscaped(std::string("a\\b\"c\nd"), sink);
  agent::metrics_text::appendEscaped(std::string("\xff\xfe"), sink);  // not UTF-8: replaced
  EXPECT_EQ(out.substr(0, 5), "loop0");
  EXPECT_EQ(out.substr(5, 10), "a\\\\b\\\"c\\nd");
  EXPECT_TRUE(common::isUtf8(out));
  EXPECT_NE(out.substr(15), "\xff\xfe");
}

// The check of eight bytes a step against a byte at a time: every length to 40, each kind of
// byte that needs more than a copy at each place.
TEST(MetricsText, PlainAsciiTellsEveryByteThatNeedsEscapingAtEveryPlace) {
  const auto reference = [](std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x80 && c != '\\' && c != '"' && c != '\n';
    });
  };
  for (size_t n = 0; n <= 40; ++n) {
    std::string v(n, 'a');
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>('!' + (i * 7) % 90);
    EXPECT_EQ(agent::metrics_text::plainAscii(v), reference(v)) << v;
    for (size_t at = 0; at < n; ++at) {
      for (char bad : {'\\', '"', '\n', '\x80', '\xff', '\x7f'}) {
        std::string w = v;
        w[at] = bad;
        EXPECT_EQ(agent::metrics_text::plainAscii(w), reference(w)) << n << " " << at;
      }
    }
  }
}

// Pieces of every length up to past the in-place copies, into a buffer that must grow.
TEST(MetricsText, ThePageBufferKeepsEveryPieceWhole) {
  agent::metrics_text::PageBuffer buffer(8);
  std::string expected;
  for (size_t n = 0; n <= 40; ++n) {
    std::string piece(n, ' ');
    for (size_t i = 0; i < n; ++i) piece[i] = static_cast<char>('a' + (n + i) % 26);
    buffer.append(piece.data(), piece.size());
    expected += piece;
  }
  EXPECT_EQ(buffer.take(), expected);
}

// A histogram's series as the text format spells them, its labels written once for every bucket:
// escaped, in order, before le; and the bounds kept from one page to the next redone where the
// same array holds other values.
TEST(MetricsText, AHistogramsBucketsCarryItsLabelsAndBounds) {
  agent::metrics_text::PageMemo memo;
  double bounds[] = {0.5, 1};
  const uint64_t per_bound[] = {1, 2};
  const auto page = [&](std::span<const agent::Label> labels) {
    agent::metrics_text::Writer w(&memo);
    w.family("h_seconds", "histogram", "A histogram.");
    w.histogram(labels, bounds, per_bound, 2, 4, 3.25);
    return w.take();
  };
  const std::string header = "# HELP h_seconds A histogram.\n# TYPE h_seconds histogram\n";
  const agent::Label labels[] = {{"device", "a\"b"}, {"op", "read"}};
  EXPECT_EQ(page(labels), header +
                              "h_seconds_bucket{device=\"a\\\"b\",op=\"read\",le=\"0.5\"} 1\n"
                              "h_seconds_bucket{device=\"a\\\"b\",op=\"read\",le=\"1\"} 3\n"
                              "h_seconds_bucket{device=\"a\\\"b\",op=\"read\",le=\"+Inf\"} 4\n"
                              "h_seconds_sum{device=\"a\\\"b\",op=\"read\"} 3.25\n"
                              "h_seconds_count{device=\"a\\\"b\",op=\"read\"} 4\n");
  bounds[0] = 0.25;
  EXPECT_EQ(page({}), header +
                          "h_seconds_bucket{le=\"0.25\"} 1\n"
                          "h_seconds_bucket{le=\"1\"} 3\n"
                          "h_seconds_bucket{le=\"+Inf\"} 4\n"
                          "h_seconds_sum 3.25\n"
                          "h_seconds_count 4\n");
}

// Families asked in another order than the page before, one gone, one new, one reused with other
// words: each page has each family's own lines.
TEST(MetricsText, ThePageMemoFollowsTheFamiliesAsTheyChange) {
  agent::metrics_text::PageMemo memo;
  static const char* const kA = "a_total";
  static const char* const kB = "b_total";
  static const char* const kC = "c_total";
  const auto page = [&](std::initializer_list<std::pair<const char*, const char*>> families) {
    agent::metrics_text::Writer memoised(&memo), fresh;
    for (const auto& [name, help] : families) {
      memoised.family(name, "counter", help);
      fresh.family(name, "counter", help);
    }
    const std::string text = memoised.take();
    EXPECT_EQ(text, fresh.take());
    return text;
  };
  page({{kA, "A."}, {kB, "B."}});
  page({{kA, "A."}, {kB, "B."}});
  const std::string reordered = page({{kB, "B."}, {kC, "C."}, {kA, "A."}});
  EXPECT_EQ(reordered.find("# HELP b_total B."), 0u) << reordered;
  const std::string reworded = page({{kB, "B."}, {kC, "Other words."}, {kA, "A."}});
  EXPECT_NE(reworded.find("# HELP c_total Other words.\n"), std::string::npos) << reworded;
}

// The endpoint's renderer keeps the families' lines from one page to the next: each page is the
// page rendered anew, as its families come and go.
TEST(Metrics, ThePageRendererKeepsThePageOfEachSnapshot) {
  MetricsPageRenderer renderer;
  MetricsSnapshot s = sample();
  const std::string first = renderer.render(s, std::nullopt);
  EXPECT_EQ(first, renderMetrics(s));
  EXPECT_EQ(renderer.render(s, std::nullopt), first);
  s.hooks.reset();
  s.webhook = WebhookStats{};
  s.disks.clear();
  EXPECT_EQ(renderer.render(s, std::nullopt), renderMetrics(s));
  EXPECT_NE(renderer.render(s, std::nullopt), first);
}

TEST(Metrics, RendersBaseUnitsAndTheActiveStall) {
  const std::string text = renderMetrics(sample());
  for (const char* line : {
           "stallwatch_disk_read_await_seconds{device=\"loop0\"} 0.0765\n",
           "stallwatch_disk_queue_length{device=\"loop0\"} 7.9\n",
           "stallwatch_disk_busy_ratio{device=\"loop0\"} 0.99\n",
           "stallwatch_pressure_some_ratio{resource=\"io\"} 0.97\n",
           "stallwatch_job_gpu_utilization_ratio{training_job=\"pid:960:38819\"} 0.03\n",
           "stallwatch_job_dataloader_wait_ratio{training_job=\"pid:960:38819\"} 0.9\n",
           "stallwatch_stall_active{training_job=\"pid:960:38819\",class=\"disk-slow\",device="
           "\"loop0\"} "
           "1\n",
           "stallwatch_stall_active{training_job=\"torchelastic:ddp\",class=\"disk-slow\",device="
           "\"loop0\","
           "rank=\"1\"} 1\n",
           "stallwatch_incidents_total{class=\"disk-slow\"} 1\n",
           "stallwatch_incidents_total{class=\"not-storage\"} 0\n",
           "stallwatch_collector_success{collector=\"diskstats\"} 1\n",
           "stallwatch_collector_success{collector=\"gpu\"} 0\n",
           "stallwatch_collector_runs_total{collector=\"gpu\",outcome=\"error\"} 42\n",
           "stallwatch_hook_runs_total{result=\"timed_out\"} 2\n",
           "stallwatch_drive_health{device=\"sda\",verdict=\"warning\"} 1\n",
           "# TYPE stallwatch_intervals_total counter\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
  // A device without reads has no read await (absent, not 0).
  EXPECT_EQ(text.find("stallwatch_disk_write_await_seconds{"), std::string::npos);
  // No webhook configured: no webhook family.
  EXPECT_EQ(text.find("stallwatch_webhook_posts_total"), std::string::npos);
}

// The standing verdict of each job's last minute: its input-wait share, its limiter (one series
// a job, the limiter as label) and the speed-up on offer.
TEST(Metrics, TheStandingLimiterOfEachJob) {
  MetricsSnapshot s = sample();
  model::LimiterVerdict v;
  v.limiter = model::Limiter::kInputCpu;
  v.wait_source = model::WaitSource::kHook;
  v.input_wait_share = 0.35;
  v.speedup = 1.54;
  s.limiters.push_back({"pid:960:38819", "python train.py", v});
  const std::string page = renderMetrics(s);
  EXPECT_NE(page.find("stallwatch_job_input_wait_ratio{training_job=\"pid:960:38819\"} 0.35"),
            std::string::npos)
      << page;
  EXPECT_NE(
      page.find("stallwatch_job_limiter{training_job=\"pid:960:38819\",limiter=\"input-cpu\"} 1"),
      std::string::npos);
  EXPECT_NE(page.find("stallwatch_job_speedup_on_offer{training_job=\"pid:960:38819\"} 1.54"),
            std::string::npos);
}

// A job in a Kubernetes pod: each of its series carries the pod's namespace, pod and container,
// as dcgm-exporter's do, to join them; a job outside a pod carries none.
TEST(Metrics, AJobInAPodCarriesItsNamespacePodAndContainer) {
  MetricsSnapshot s = sample();
  collectors::JobSample k;
  k.key = "k8s:ml/trainer-0";
  k.gpu_util_percent = 50;
  k.pod = collectors::PodName{"ml", "trainer-0", "pytorch"};
  s.jobs.push_back(k);
  s.stalls.push_back({3, "k8s:ml/trainer-0", "train.py", model::StallClass::kDiskSlow, "loop0",
                      "vda", 1'795'318'653'000, ""});
  model::LimiterVerdict v;
  v.limiter = model::Limiter::kGpu;
  s.limiters.push_back({"k8s:ml/trainer-0", "train.py", v});
  const std::string page = renderMetrics(s);
  const std::string pod =
      "training_job=\"k8s:ml/trainer-0\",namespace=\"ml\",pod=\"trainer-0\","
      "container=\"pytorch\"";
  for (const std::string& line : {
           "stallwatch_job_gpu_utilization_ratio{" + pod + "} 0.5\n",
           "stallwatch_stall_active{" + pod + ",class=\"disk-slow\",device=\"loop0\"} 1\n",
           "stallwatch_job_limiter{" + pod + ",limiter=\"gpu\"} 1\n",
       }) {
    EXPECT_NE(page.find(line), std::string::npos) << line << "\nin:\n" << page;
  }
  EXPECT_NE(
      page.find("stallwatch_job_gpu_utilization_ratio{training_job=\"pid:960:38819\"} 0.03\n"),
      std::string::npos);
  // A container the kubelet does not name: namespace and pod only.
  s.jobs.back().pod->container.clear();
  EXPECT_NE(renderMetrics(s).find(
                "{training_job=\"k8s:ml/trainer-0\",namespace=\"ml\",pod=\"trainer-0\"} 0.5"),
            std::string::npos);
}

// A per-I/O latency row of loop0's reads: JOB's (or everyone else's), COUNT of them in SLOTS.
collectors::IoLatencySample row(const char* job, uint64_t count, const char* slots) {
  collectors::IoLatencySample r;
  r.device = "loop0";
  r.op = "read";
  r.job_key = job;
  r.count = count;
  r.mean_ms = 0.1;
  r.slots = slots;
  return r;
}

// The OTLP export of the same families: a histogram as OTLP's explicit buckets (each bound's own
// count, one more bucket than bounds for those above the last, summing to the count), a
// counter as a cumulative monotonic sum without "_total", a pod's labels as attributes.
TEST(Metrics, OtlpExportOfHistogramsCountersAndPodLabels) {
  IoLatencyTotals totals;
  addIoLatency({row("k8s:ml/trainer-0", 3, "71:3"), row("", 5, "27:5")}, totals);
  MetricsSnapshot s;
  for (const auto& [key, m] : totals) s.io_latency.push_back(m);
  s.intervals = 42;
  s.jobs.emplace_back();
  s.jobs.back().key = "k8s:ml/trainer-0";
  s.jobs.back().gpu_util_percent = 50;
  s.jobs.back().pod = collectors::PodName{"ml", "trainer-0", "main"};
  const auto request = nlohmann::json::parse(
      renderOtlp(s, std::nullopt, {"node-a", "0.2.0", 1'000'000'000}, 2'000'000'000));
  const auto& metrics = request["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
  auto metric = [&](const std::string& name) {
    for (const auto& m : metrics)
      if (m["name"] == name) return m;
    return nlohmann::json();
  };
  const auto intervals = metric("stallwatch_intervals");
  ASSERT_FALSE(intervals.is_null()) << request.dump(1);
  EXPECT_TRUE(metric("stallwatch_intervals_total").is_null());
  EXPECT_EQ(intervals["sum"]["aggregationTemporality"], 2);
  EXPECT_EQ(intervals["sum"]["isMonotonic"], true);
  EXPECT_EQ(intervals["sum"]["dataPoints"][0]["asDouble"], 42);
  EXPECT_EQ(intervals["sum"]["dataPoints"][0]["startTimeUnixNano"], "1000000000");
  EXPECT_EQ(intervals["sum"]["dataPoints"][0]["timeUnixNano"], "2000000000");
  const auto job = metric("stallwatch_job_io_latency_seconds")["histogram"]["dataPoints"][0];
  EXPECT_EQ(job["count"], "3");
  ASSERT_EQ(job["bucketCounts"].size(), job["explicitBounds"].size() + 1);
  uint64_t summed = 0;
  for (const auto& c : job["bucketCounts"]) summed += std::stoull(c.get<std::string>());
  EXPECT_EQ(summed, 3u);
  // Slot 71 (1.92-2.05 ms) counts at the bound 0.0025, as the text page's le="0.0025".
  for (size_t i = 0; i < job["explicitBounds"].size(); ++i) {
    if (job["explicitBounds"][i] == 0.0025) {
      EXPECT_EQ(job["bucketCounts"][i], "3");
    }
  }
  nlohmann::json attributes = nlohmann::json::object();
  for (const auto& a : job["attributes"]) attributes[a["key"]] = a["value"]["stringValue"];
  EXPECT_EQ(attributes, (nlohmann::json{{"training_job", "k8s:ml/trainer-0"},
                                        {"namespace", "ml"},
                                        {"pod", "trainer-0"},
                                        {"container", "main"},
                                        {"device", "loop0"},
                                        {"op", "read"}}));
  EXPECT_EQ(metric("stallwatch_job_gpu_utilization_ratio")["unit"], "1");
  EXPECT_EQ(metric("stallwatch_job_gpu_utilization_ratio")["gauge"]["dataPoints"][0]["asDouble"],
            0.5);
}

// Per-I/O latency: everyone's histogram per device and operation, a followed job's own in a
// family of its own (a sum over either counts each I/O once), gone when the job ends.
TEST(Metrics, PerIoLatencyPerDeviceAndPerFollowedJob) {
  IoLatencyTotals totals;
  // Slot 71 holds 1.92-2.05 ms (counted at le=0.0025), slot 27 44-48 us (at le=0.00005).
  addIoLatency({row("job-7", 3, "71:3"), row("", 5, "27:5")}, totals);
  addIoLatency({row("job-7", 2, "71:2")}, totals);
  MetricsSnapshot s;
  for (const auto& [key, m] : totals) s.io_latency.push_back(m);
  const std::string page = renderMetrics(s);
  EXPECT_NE(page.find("stallwatch_io_latency_seconds_count{device=\"loop0\",op=\"read\"} 10\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("stallwatch_job_io_latency_seconds_count{training_job=\"job-7\",device="
                      "\"loop0\",op=\"read\"} 5\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("stallwatch_job_io_latency_seconds_bucket{training_job=\"job-7\",device="
                      "\"loop0\",op=\"read\",le=\"0.001\"} 0\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("stallwatch_job_io_latency_seconds_bucket{training_job=\"job-7\",device="
                      "\"loop0\",op=\"read\",le=\"0.0025\"} 5\n"),
            std::string::npos)
      << page;
  forgetIoLatencyOf("job-7", totals);
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_EQ(std::get<2>(totals.begin()->first), "");
  EXPECT_EQ(totals.begin()->second.count, 10u);
}

TEST(Metrics, EscapesLabelValues) {
  MetricsSnapshot s;
  collectors::DiskSample d;
  d.device = "we\"ird\\dev\nice";
  s.disks.push_back(d);
  const std::string text = renderMetrics(s);
  EXPECT_NE(text.find("device=\"we\\\"ird\\\\dev\\nice\""), std::string::npos) << text;
}

// The ranks of runs across nodes: a job of several ranks here gives each rank's figures, a job
// of one rank its own under the rank its environment names; a job of no run gives none, and a
// job that ended is forgotten.
TEST(Metrics, RanksOfRunsAcrossNodesCarryRunRankAndNode) {
  RunShares shares;
  collectors::SampleBatch b;
  b.interval_seconds = 2;
  collectors::JobDescription several, one, alone;
  several.key = "torchelastic:r1";
  one.key = "cgroup:/sys/fs/cgroup/rank5";
  one.labels = "TORCHELASTIC_RUN_ID=r2,RANK=5,WORLD_SIZE=8";
  alone.key = "pid:42:7";
  alone.labels = "RANK=0";
  b.job_updates = {several, one, alone};
  noteRunShares(shares, b);
  EXPECT_EQ(shares.size(), 2u);
  collectors::RankSample r0, r1;
  r0.key = r1.key = "torchelastic:r1";
  r0.rank = 0;
  r0.gpu_util_percent = 97;
  r1.rank = 1;
  r1.gpu_util_percent = 2;
  r1.data_wait_seconds = 1.8;
  r1.step_seconds = 0.2;
  b.ranks = {r0, r1};
  collectors::JobSample j_several, j_one, j_alone;
  j_several.key = "torchelastic:r1";
  j_several.gpu_util_percent = 50;
  j_one.key = one.key;
  j_one.gpu_util_percent = 88;
  j_one.steps = 10;
  j_alone.key = alone.key;
  j_alone.gpu_util_percent = 10;
  b.jobs = {j_several, j_one, j_alone};
  MetricsSnapshot s;
  s.node = "gpu-07";
  s.ranks = rankMetrics(b, shares);
  ASSERT_EQ(s.ranks.size(), 3u);
  const std::string text = renderMetrics(s);
  EXPECT_NE(text.find("stallwatch_rank_gpu_utilization_ratio{run=\"torchelastic:r1\",rank=\"1\","
                      "node=\"gpu-07\"} 0.02"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("stallwatch_rank_dataloader_wait_ratio{run=\"torchelastic:r1\",rank=\"1\","
                      "node=\"gpu-07\"} 0.9"),
            std::string::npos);
  EXPECT_NE(text.find("stallwatch_rank_steps_per_second{run=\"torchelastic:r2\",rank=\"5\","
                      "node=\"gpu-07\"} 5"),
            std::string::npos);
  EXPECT_EQ(text.find("pid:42:7"), std::string::npos);
  EXPECT_EQ(text.find("rank=\"0\",node=\"gpu-07\"} 0.5"), std::string::npos);  // no job-wide row
  collectors::SampleBatch ended;
  one.ended_ms = 5;
  ended.job_updates = {one};
  noteRunShares(shares, ended);
  EXPECT_EQ(shares.count(one.key), 0u);
}

// What the fleet report reads from Prometheus (issue 35): each job of a run joined to its run
// and node by an info series, the devices it reads, its writes, workers and cgroup figures.
TEST(Metrics, JobsOfARunSayTheirRunNodeDevicesAndCgroup) {
  RunShares shares;
  JobDevices devices;
  collectors::SampleBatch b;
  collectors::JobDescription one, other;
  one.key = "cgroup:/sys/fs/cgroup/rank5";
  one.labels = "TORCHELASTIC_RUN_ID=r2,RANK=5,WORLD_SIZE=8";
  other.key = "pid:42:7";
  b.job_updates = {one, other};
  b.job_devices = {{one.key, "loop0", 7, 0, "", 3},
                   {one.key, "nvme0n1", 259, 0, "loop0", 3},
                   {one.key, "nvme0n1", 259, 0, "", 1}};
  noteRunShares(shares, b);
  noteJobDevices(devices, b);
  collectors::JobSample j;
  j.key = one.key;
  j.gpus = {"GPU-a", "GPU-b"};
  j.gpu_work_percent = 40;
  j.write_bytes_per_second = 1e6;
  j.workers_cpu_ratio = 3.5;
  j.cgroup_io_some = 0.25;
  j.cgroup_read_limit_bytes_per_second = 15e6;
  collectors::JobSample j_other;
  j_other.key = other.key;
  MetricsSnapshot s;
  s.node = "gpu-07";
  s.jobs = {j, j_other};
  s.job_runs = shares;
  s.job_devices = devices;
  const std::string text = renderMetrics(s);
  for (
      const char* line :
      {"stallwatch_run_job_info{run=\"torchelastic:r2\",node=\"gpu-07\",training_job=\"cgroup:/"
       "sys/fs/cgroup/rank5\",world_size=\"8\"} 1",
       "stallwatch_job_device_info{training_job=\"cgroup:/sys/fs/cgroup/rank5\",device=\"loop0\","
       "via=\"\"} 1",
       "stallwatch_job_device_info{training_job=\"cgroup:/sys/fs/cgroup/rank5\",device=\"nvme0n1\","
       "via=\"loop0\"} 1",
       "stallwatch_job_device_info{training_job=\"cgroup:/sys/fs/cgroup/rank5\",device=\"nvme0n1\","
       "via=\"\"} 1",
       "stallwatch_job_gpu_work_ratio{training_job=\"cgroup:/sys/fs/cgroup/rank5\"} 0.4",
       "stallwatch_job_gpus{training_job=\"cgroup:/sys/fs/cgroup/rank5\"} 2",
       "stallwatch_job_write_bytes_per_second{training_job=\"cgroup:/sys/fs/cgroup/rank5\"} "
       "1000000",
       "stallwatch_job_workers_cpu_cores{training_job=\"cgroup:/sys/fs/cgroup/rank5\"} 3.5",
       "stallwatch_job_cgroup_pressure_some_ratio{training_job=\"cgroup:/sys/fs/cgroup/rank5\","
       "resource=\"io\"} 0.25",
       "stallwatch_job_cgroup_read_limit_bytes_per_second{training_job=\"cgroup:/sys/fs/cgroup/"
       "rank5\"} 15000000"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // A job of no run has no info series; a figure not known is absent, not 0.
  EXPECT_EQ(text.find("stallwatch_run_job_info{run=\"\""), std::string::npos);
  EXPECT_EQ(text.find("training_job=\"pid:42:7\",world_size"), std::string::npos);
  EXPECT_EQ(text.find("stallwatch_job_write_bytes_per_second{training_job=\"pid:42:7\"}"),
            std::string::npos);
  collectors::SampleBatch ended;
  one.ended_ms = 5;
  ended.job_updates = {one};
  noteJobDevices(devices, ended);
  EXPECT_EQ(devices.count(one.key), 0u);
}

// Counters for rate() beside the last interval's gauges, in base units (node_exporter's way):
// a replayed sample without the raw counters gives no counter series rather than zeros.
TEST(Metrics, DiskAndPressureCountersForRate) {
  MetricsSnapshot s;
  collectors::DiskSample live, replayed;
  live.device = "nvme0n1";
  live.totals = collectors::DiskTotals{1000, 4096000, 2500, 10, 40960, 30, 1200, 3100};
  replayed.device = "vda";
  s.disks = {live, replayed};
  collectors::PressureSample io{"io", 0.1, 0.0, 2'500'000, 1'000'000};
  s.pressure.push_back(io);
  const std::string text = renderMetrics(s);
  for (const char* line : {"# TYPE stallwatch_disk_read_time_seconds_total counter",
                           "stallwatch_disk_reads_completed_total{device=\"nvme0n1\"} 1000",
                           "stallwatch_disk_read_bytes_total{device=\"nvme0n1\"} 4096000",
                           "stallwatch_disk_read_time_seconds_total{device=\"nvme0n1\"} 2.5",
                           "stallwatch_disk_io_time_weighted_seconds_total{device=\"nvme0n1\"} 3.1",
                           "stallwatch_pressure_some_seconds_total{resource=\"io\"} 2.5",
                           "stallwatch_pressure_full_seconds_total{resource=\"io\"} 1"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("reads_completed_total{device=\"vda\"}"), std::string::npos);
}

// NFS and FUSE mounts have families of their own, labelled by mount point and type; the
// block-device families leave them out (%util and r/s mean nothing for a FUSE queue).
TEST(Metrics, MountsHaveTheirOwnFamilies) {
  MetricsSnapshot s;
  collectors::DiskSample nfs, fuse;
  nfs.device = "/data";
  nfs.rates.r_await_ms = 85;
  nfs.rates.aqu_sz = 2.5;
  nfs.nfs = collectors::NfsRates{80.0, std::nullopt, 12, 3.0, 40, 0};
  fuse.device = "/mnt/s3";
  fuse.rates.aqu_sz = 6;
  s.disks = {nfs, fuse};
  const std::string text = renderMetrics(s);
  for (const char* line :
       {"stallwatch_mount_read_await_seconds{mountpoint=\"/data\",fstype=\"nfs\"} 0.085",
        "stallwatch_mount_queue_length{mountpoint=\"/data\",fstype=\"nfs\"} 2.5",
        "stallwatch_mount_queue_length{mountpoint=\"/mnt/s3\",fstype=\"fuse\"} 6",
        "stallwatch_nfs_read_rtt_seconds{mountpoint=\"/data\",fstype=\"nfs\"} 0.08",
        "stallwatch_nfs_retransmissions_per_second{mountpoint=\"/data\",fstype=\"nfs\"} 40"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("stallwatch_disk_busy_ratio{device=\"/"), std::string::npos);
  EXPECT_EQ(text.find("read_await_seconds{mountpoint=\"/mnt/s3\""), std::string::npos);
}

// As node_exporter's ":9100": every interface (an empty host) unless an address is given.
TEST(ListenAddress, EveryInterfaceUnlessAnAddressIsGiven) {
  auto a = parseListenAddress("9877");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "");
  EXPECT_EQ(a->port, 9877);
  a = parseListenAddress(":9877");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "");
  a = parseListenAddress("127.0.0.1:9877");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  a = parseListenAddress("0.0.0.0:80");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "0.0.0.0");
  a = parseListenAddress("[::1]:9877");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  for (const char* bad : {"", "x", "1:2:3", "host:99999", "host:", "[::1]", "127.0.0.1:-1"}) {
    EXPECT_FALSE(parseListenAddress(bad)) << bad;
  }
}

// Prometheus keeps its scrape connection (HTTP/1.1 keep-alive): the answer says whether the
// connection stays open, and errors, HTTP/1.0 and a client's "Connection: close" close it.
TEST(HttpResponse, KeepsAnHttp11ConnectionUnlessAskedOrInError) {
  auto page = [](std::string_view path) -> HttpBody {
    if (path == "/metrics") return std::make_shared<const std::string>("up 1\n");
    return nullptr;
  };
  const auto kept = httpResponse("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", page);
  EXPECT_TRUE(kept.keep_alive);
  EXPECT_NE(kept.bytes().find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_NE(kept.bytes().find("Content-Length: 5\r\n"), std::string::npos);
  EXPECT_TRUE(kept.bytes().ends_with("\r\n\r\nup 1\n"));
  // HEAD: the same head, no body.
  const auto head_only = httpResponse("HEAD /metrics HTTP/1.1\r\n\r\n", page);
  EXPECT_EQ(head_only.head, kept.head);
  EXPECT_EQ(head_only.bytes(), kept.head);
  for (const char* head :
       {"GET /metrics HTTP/1.1\r\nconnection: Close\r\n\r\n", "GET /metrics HTTP/1.0\r\n\r\n",
        "POST /metrics HTTP/1.1\r\n\r\n", "nonsense\r\n\r\n"}) {
    const auto closed = httpResponse(head, page);
    EXPECT_FALSE(closed.keep_alive) << head;
    EXPECT_NE(closed.bytes().find("Connection: close\r\n"), std::string::npos) << head;
  }
  // A path not served is answered as such, and the connection kept.
  const auto missing = httpResponse("GET /x HTTP/1.1\r\n\r\n", page);
  EXPECT_NE(missing.bytes().find("404"), std::string::npos);
  EXPECT_TRUE(missing.keep_alive);
}

}  // namespace
}  // namespace stallwatch::agent
