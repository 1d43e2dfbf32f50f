// Turns a recording back into the batches the agent produced, tick by tick, so that the live
// path (correlator, hooks, webhook, metrics) can be driven by a real run after the fact:
// `stallwatch replay`, the live tests, and soaks over days of fast-forwarded samples.
//
// What comes back is what the DB keeps: per-interval disk, pressure, GPU and job figures,
// job descriptions at their start and end, and each job's device facts at the tick they were
// first seen. Counters are not stored, so the batches carry rates, as the collectors emit.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <functional>

#include "collectors/samples.h"

namespace stallwatch::storage {

struct ReplayStats {
  uint64_t batches = 0;
  int64_t first_ms = 0;
  int64_t last_ms = 0;
};

// Calls FN with each tick's batch, in time order; FN returns false to stop early. Streams:
// memory does not grow with the recording's length.
ReplayStats replayRecording(SQLite::Database& db, const std::function<bool(collectors::SampleBatch&)>& fn);

}  // namespace stallwatch::storage
