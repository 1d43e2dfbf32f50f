// The post-mortem of one recorded job: the analysis, then what a report says about it
// (goodput, holes in the samples, device latency and per-rank figures). Pure computation like
// the rest of the correlator: what it needs of the recording comes in through OtherDevices
// (storage's Recording::addOtherDevices).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "correlator/limiter.h"
#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

// A hole in the job's samples: the agent stopped, or dropped intervals it could not write.
struct Gap {
  int64_t start_ms = 0, end_ms = 0;
  int64_t missing_intervals = 0;
};

struct DeviceLatency {
  std::string name;
  std::string via;
  bool job_reads = false;
  bool also_direct = false;
  std::optional<double> r_await_p50, r_await_p99, w_await_p50,
      w_await_p99;  // per-interval await, ms
};
// A device's latency over the series' span: its await percentiles, its relation to the job.
DeviceLatency deviceLatency(const model::DeviceSeries& d);

// A rank's medians over the job's span.
struct RankFigures {
  int32_t rank = 0;
  uint32_t pid = 0;
  std::string gpu;
  std::optional<double> gpu_util_p50_percent, gpu_work_p50_percent, steps_per_second_p50,
      data_wait_share_p50, read_bytes_per_second_p50;
};

// Share of the job's GPU time (or, without GPUs, of its time) that did its work, or none with
// why: "100 %" said of a job nothing could judge (one interval, no progress signal, progress
// zero throughout) is a wrong answer (issue 46). What was lost is both kinds of waiting: the
// stalls (incidents) and the standing wait for input outside them that the limiter measured
// (issue 42: "goodput 100 %" above "the loop waited for input 80 %"). A wait that was not
// measured (no hook and no sampled main thread, or a verdict whose bounds straddle its
// threshold) is not counted, and said so.
struct Goodput {
  std::optional<double> share;
  const char* unknown_because = "";         // where there is no share
  double stall_gpu_seconds = 0;             // lost to incidents (seconds, for a job without GPUs)
  double input_wait_gpu_seconds = 0;        // waiting for input outside incidents
  const char* input_wait_not_counted = "";  // why the standing wait is not in the share
};

struct JobSummary {
  Analysis analysis;
  model::JobLimits limits;  // what limited the job outside its incidents
  Goodput goodput;
  std::vector<Gap> gaps;
  std::vector<DeviceLatency> devices;  // the devices the job reads
  std::vector<RankFigures> ranks;
};

JobSummary summarizeRecordedJob(JobSeries& series, const OtherDevices& other_devices,
                                const DetectorConfig& config = {},
                                const LimiterConfig& limiter = {});

// Goodput (above): by GPU-seconds where the job has GPUs; without them, by time, an incident's
// intervals weighted by how idle they were. STANDING is the limiter's verdict over the run
// outside the incidents (none: the stalls alone, said so).
Goodput goodputOf(const Analysis& analysis, const JobSeries& series,
                  const model::LimiterVerdict* standing);
// A report over part of a run (--since/--until) judged the way the whole run is: CONTEXT is the
// job judged over a longer span around WINDOW_SERIES (same recording, same interval times), so
// that a stall under way when the window opens is judged against the pace before it (issue 46:
// 14 s inside a recorded stall said "goodput 100 %, incidents 0"). WINDOW's incidents become
// CONTEXT's that overlap the window, clipped to it and re-indexed, their GPU-seconds lost in
// proportion to the part inside.
void takeIncidentsFrom(const Analysis& context, const JobSeries& context_series, Analysis& window,
                       const JobSeries& window_series);
// Holes longer than one and a half of the job's typical interval.
std::vector<Gap> gapsOf(const JobSeries& series);
RankFigures rankFigures(const JobSeries& series, const RankSeries& rank);

}  // namespace stallwatch::correlator
