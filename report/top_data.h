// What `stallwatch top` shows, read from a recording each refresh (model::TopData); the screen's
// lines are render/top_view.h's, the terminal cli/top_command.cpp's.
#pragma once

#include <cstdint>

#include "model/report.h"
#include "storage/recording.h"

namespace stallwatch::report {

// What the screen shows at NOW_MS: the jobs running or ended within the last minute, their last
// minute of samples (figures are over the last 5 s of it; the minute says whether the job
// reports steps, so that a silent loop shows 0 steps/s, not none) and what limits each over it,
// and the open incidents updated within the last minute (older ones were left open by an agent
// that stopped). Read-only.
model::TopData readTop(storage::Recording& recording, int64_t now_ms);

}  // namespace stallwatch::report
