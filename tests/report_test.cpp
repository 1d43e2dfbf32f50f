// The post-mortem library (report/) on every committed recording, and the renderers fed a
// report made by hand: they say what the records hold and compute nothing themselves.
#include "render/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "render/top_view.h"
#include "report/job_report.h"
#include "report/top_data.h"
#include "storage/recording.h"
#include "test_support.h"

namespace stallwatch::report {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> committedRecordings() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(testing::fixtures() / "recordings"))
    if (e.path().extension() == ".db") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// A copy in a scratch directory, with its WAL: opening a recording may checkpoint it.
fs::path copyOf(const fs::path& db, const fs::path& dir) {
  const fs::path to = dir / db.filename();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const fs::path from = db.string() + suffix;
    if (fs::exists(from)) fs::copy_file(from, to.string() + suffix);
  }
  return to;
}

TEST(JobReports, EveryVerdictComesWithItsWordsOnEveryRecording) {
  const auto recordings = committedRecordings();
  ASSERT_GE(recordings.size(), 50u) << "the committed recordings were not found";
  size_t jobs = 0, incidents = 0, ranked_incidents = 0;
  for (const auto& db : recordings) {
    SCOPED_TRACE(db.string());
    testing::ScratchDir scratch;
    auto recording = storage::Recording::open(copyOf(db, scratch.path()).string());
    const auto reports = buildJobReports(recording, std::nullopt, {});
    const auto stored = postMortemIncidents(recording, std::nullopt);
    size_t found = 0;
    for (const auto& r : reports) {
      ++jobs;
      found += r.analysis.incidents.size();
      // The words of each verdict, one for one.
      EXPECT_TRUE(r.limiter_words.run.starts_with(model::toString(r.limits.run.limiter)))
          << r.limiter_words.run;
      EXPECT_EQ(r.limiter_words.phases.size(), std::max<size_t>(1, r.limits.phases.size()));
      EXPECT_EQ(r.limiter_words.ranks.size(), r.limits.ranks.size());
      ASSERT_EQ(r.incident_ranks.size(), r.analysis.incidents.size());
      for (size_t k = 0; k < r.incident_ranks.size(); ++k) {
        ++incidents;
        // A job of several ranks says who held it back; a job of one says nothing of ranks.
        if (!r.incident_ranks[k].empty()) ++ranked_incidents;
        if (r.series.ranks.size() < 2) {
          EXPECT_EQ(r.incident_ranks[k], "");
        }
      }
      const bool slowest = r.analysis.progress_signal == model::ProgressSignal::kSlowestRankGpuUtil;
      EXPECT_EQ(r.slowest_rank_gpu_util.size(), slowest ? r.series.size() : 0u);
      // The job's own devices, each with its latency.
      for (const auto& d : r.devices) EXPECT_TRUE(d.job_reads) << d.name;
    }
    // `incidents` and `report` give the same answer.
    EXPECT_EQ(stored.size(), found);
  }
  EXPECT_GT(jobs, 50u);
  EXPECT_GT(incidents, 20u);
  EXPECT_GT(ranked_incidents, 0u) << "no DDP incident named its ranks";
}

TEST(JobReports, TopReadsTheLimiterOfEachJobsLastMinute) {
  testing::ScratchDir scratch;
  const fs::path db =
      copyOf(testing::fixtures() / "recordings" / "h200-stall-disk.db", scratch.path());
  auto recording = storage::Recording::open(db.string());
  const auto jobs = recording.jobs();
  ASSERT_FALSE(jobs.empty());
  const int64_t at = jobs.front().started_ms + 90'000;
  const model::TopData data = readTop(recording, at);
  ASSERT_FALSE(data.jobs.empty());
  ASSERT_EQ(data.limiters.size(), data.jobs.size());
  ASSERT_EQ(data.series.size(), data.jobs.size());
  ASSERT_TRUE(data.limiters.front().has_value());
  // The screen says the verdict it was given.
  const auto lines = render::renderTop(data, {}, 120, 40);
  const std::string limiter = "limiter " + std::string(model::toString(data.limiters[0]->limiter));
  const bool said = std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(limiter) != std::string::npos;
  });
  EXPECT_TRUE(said || data.limiters[0]->limiter == model::Limiter::kUnknown) << limiter;
}

// A report made by hand, no recording and no correlator: the text and the page say the words
// and figures they are given, as given.
TEST(Renderers, SayTheWordsTheyAreGiven) {
  model::JobReport r;
  r.job.job_id = 7;
  r.job.label = "train.py";
  r.job.key = "pid:7";
  for (const int64_t ts : {1'000, 2'000, 3'000}) model::appendInterval(r.series, ts, 1.0);
  r.limits.run.limiter = model::Limiter::kInputCpu;
  r.limits.run.seconds = 3;
  r.limits.run.start_ms = 1'000;
  r.limits.run.end_ms = 3'000;
  r.limiter_words.run = "input-cpu: words made by hand, not by the correlator";
  r.limiter_words.phases = {"input-cpu: band words by hand"};
  model::Incident inc;
  inc.start_ms = 1'000;
  inc.end_ms = 3'000;
  inc.cls = model::StallClass::kDiskSlow;
  inc.device = "vdz";
  r.analysis.incidents.push_back(inc);
  r.incident_ranks = {"rank 9 (pid 99) starved: a line made by hand"};
  r.goodput.share = 0.5;
  const std::string text = render::renderText({r});
  EXPECT_NE(text.find("limiter     input-cpu: words made by hand, not by the correlator"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 9 (pid 99) starved: a line made by hand"), std::string::npos) << text;
  const std::string html = render::renderHtml({r}, "t");
  EXPECT_NE(html.find("words made by hand, not by the correlator"), std::string::npos);
  EXPECT_NE(html.find("band words by hand"), std::string::npos);
  EXPECT_NE(html.find("a line made by hand"), std::string::npos);
}

// `top` gives the loop's data wait as `jobs` and /metrics do, its wait over its wait and its
// steps: a 6 s wait reported at the step that ended it lands in one interval, and over the
// window's 5 s it read "data wait 120 %".
TEST(Renderers, TopSaysTheDataWaitAsAShareOfTheLoop) {
  model::TopData data;
  data.now_ms = 5'000;
  data.jobs.push_back({});
  data.jobs.back().job_id = 1;
  model::JobSeries s;
  for (int64_t ts = 1'000; ts <= 5'000; ts += 1'000) {
    const size_t i = model::appendInterval(s, ts, 1.0);
    s.steps[i] = 1;
    s.data_wait_s[i] = i == 0 ? 6.0 : 0.0;
    s.step_s[i] = 0.1;
  }
  data.series.push_back(s);
  data.limiters.emplace_back();
  const auto lines = render::renderTop(data, {}, 120, 40);
  const bool said = std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("data wait 92 %") != std::string::npos;  // 6 / (6 + 0.5)
  });
  EXPECT_TRUE(said) << lines[5] << "\n" << lines[6];
}

}  // namespace
}  // namespace stallwatch::report
