// `stallwatch top`'s screen, apart from the terminal: what it reads from a recording each
// refresh (TopData) and the lines it draws from that (renderTop), so that both are tested
// without a terminal; top_command.cpp only draws the lines and takes the keys.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/series.h"
#include "storage/recording.h"

namespace stallwatch::render {

struct TopData {
  std::string host, db_path;
  int64_t now_ms = 0;
  std::vector<storage::JobRecord> jobs;       // running first, then those that ended lately
  std::vector<model::JobSeries> series;       // each job's last minute, in the same order
  std::vector<storage::StoredIncident> open;  // live incidents the agent has not closed
  std::map<std::string, std::string> served_by;
  // With no job: the host's devices and pressure over the last minute, as iostat would show.
  std::optional<model::JobSeries> host_series;
};

// Reads what the screen shows at NOW_MS: the jobs running or ended within the last minute,
// their last minute of samples (figures are over the last 5 s of it; the minute says whether
// the job reports steps, so that a silent loop shows 0 steps/s, not none), and the open
// incidents updated within the last minute (older ones were left open by an agent that
// stopped). Read-only.
TopData readTop(storage::Recording& recording, int64_t now_ms);

struct TopState {
  size_t selected = 0;    // index into TopData::jobs
  bool evidence = false;  // the selected job's open incident, signal by signal
};

// The screen as lines of at most WIDTH characters, at most HEIGHT of them.
std::vector<std::string> renderTop(const TopData& data, const TopState& state, int width,
                                   int height);

}  // namespace stallwatch::render
