// `stallwatch report` on one recording: each job's post-mortem, read from the recording and
// judged, with what the renderers say of it worked out here (the verdicts' words, each device's
// latency, the progress drawn): model/report.h holds it, render/report.h says it.
#pragma once

#include <optional>
#include <vector>

#include "model/report.h"
#include "storage/recording.h"

namespace stallwatch::report {

// Each job of RECORDING (only JOB_ID where given) with samples in RANGE.
std::vector<model::JobReport> buildJobReports(storage::Recording& recording,
                                              std::optional<int64_t> job_id,
                                              const storage::TimeRange& range);

// JOB's standing verdict over its whole recorded run: the detector first (its incidents are their
// own account), then the limiter over the rest, as `report` judges it; without samples, a verdict
// of nothing judged.
model::JobVerdict standingVerdict(storage::Recording& recording, const model::JobRecord& job);

// The post-mortem's incidents of each job of RECORDING (only JOB_ID's where given), as `report`
// finds them: the one answer (issue 42) that `incidents` shows and `--recompute` stores.
std::vector<model::StoredIncident> postMortemIncidents(storage::Recording& recording,
                                                       std::optional<int64_t> job_id);

// The host over RANGE (a recording of devices alone, or a range in which no job has samples):
// its devices and pressure, and each device's latency.
model::HostReport buildHostReport(storage::Recording& recording, const storage::TimeRange& range);

}  // namespace stallwatch::report
