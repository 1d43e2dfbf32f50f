// A stall and the claim made about it: its class, the device or rank blamed, and the evidence
// behind the verdict. Plain data: the correlator fills it, storage keeps it, the agent and the
// CLI say it. Strings appear only where it is written out (toString / parse at the boundary).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/evidence.h"

namespace stallwatch::model {

enum class StallClass { kDiskSlow, kIoThrottled, kInputCpu, kCheckpoint, kNotStorage };
inline constexpr int kStallClassCount = 5;
const char* toString(StallClass c);  // "disk-slow", ...
// The class named TEXT; not-storage for a name this version does not know (a hand-edited row).
StallClass stallClassFromString(const std::string& text);

struct EvidenceItem {
  std::string
      signal;  // displayName(name): "await_ms loop1", "io_some", ... (older recordings: this alone)
  double baseline = 0;    // median over the baseline window
  double during = 0;      // median over the incident
  bool supports = false;  // crossed its threshold
  EvidenceName name;      // typed (older recordings: read from the signal where loaded)
};
// An item named NAME (its signal the display name).
EvidenceItem evidenceItem(EvidenceName name, double baseline, double during, bool supports);
// NOTE added to ITEM's name, and its signal said again.
void addNote(EvidenceItem& item, const std::string& note);

// The rank that held a synchronous job back.
struct Straggler {
  int32_t rank = 0;
  uint32_t pid = 0;
  std::string gpu;
};

struct Incident {
  size_t first = 0, last = 0;  // interval indices, inclusive
  int64_t start_ms = 0;        // start of the first interval
  int64_t end_ms = 0;          // end of the last
  StallClass cls = StallClass::kNotStorage;
  std::string device;           // the device the job reads that got slow
  std::string physical_device;  // the device underneath it, where they differ
  double idle_share = 0;        // share of the job's GPU (or step) capacity lost
  double gpu_seconds_lost = 0;
  double confidence = 0;
  std::vector<EvidenceItem> evidence;
  // Jobs of several ranks: the one that starved while the others waited for it, or none
  // when every rank starved alike (ranks_starved then lists them).
  std::optional<Straggler> straggler;
  std::vector<int32_t> waiting_ranks;
  std::vector<int32_t> ranks_starved;
};

enum class IncidentEventKind { kOpen, kChange, kClose };
const char* toString(IncidentEventKind kind);

// One step in a live incident's life: it opened, changed class, device or rank, or closed.
struct IncidentEvent {
  IncidentEventKind kind = IncidentEventKind::kOpen;
  uint64_t live_id = 0;  // one per incident, shared by its open, change and close events
  int64_t ts_ms = 0;     // the tick that produced the event
  std::string job_key;
  std::string job_label;
  Incident incident;           // start_ms..end_ms: so far (open, change) or final (close)
  std::string previous_class;  // change: what it was
  std::string previous_device;
  std::string previous_rank;
  // What serves the device named, where it is a mount (NFS server, FUSE daemon, an overlay's
  // devices), as the agent's device tree says: "fuse: FUSE daemon s3fs (pid 812)".
  std::string served_by;
};

}  // namespace stallwatch::model
