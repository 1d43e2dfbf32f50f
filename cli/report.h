// `stallwatch report` on one recording: each job's post-mortem, computed from the recording
// (render/report.h holds what is computed and how it is said).
#pragma once

#include <optional>
#include <vector>

#include "render/report.h"
#include "storage/recording.h"

namespace stallwatch::cli {

std::vector<render::JobReport> buildReports(storage::Recording& recording,
                                            std::optional<int64_t> job_id,
                                            const storage::TimeRange& range);

}  // namespace stallwatch::cli
