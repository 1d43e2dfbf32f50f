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

using model::DeviceLatency;
using model::Gap;
using model::Goodput;
using model::RankFigures;

// A device's latency over the series' span: its await percentiles, its relation to the job.
DeviceLatency deviceLatency(const model::DeviceSeries& d);

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
