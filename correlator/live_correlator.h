// The correlator run live: the agent feeds it each interval's batch; it keeps a bounded
// window of every job's series, runs the same analyzeJob a post-mortem runs, and turns the
// result into events: an incident opens, changes class or device, closes.
//
// Timing, the reason for the two knobs below: an incident is reported once its stall has
// lasted open_after_s (3 s by default, so that a hook runs within 5 s of the GPUs going
// idle at one-second sampling), and closed only after close_after_s without a stall, so that
// a flapping stall stays one incident instead of paging once per flap.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "collectors/samples.h"
#include "correlator/limiter.h"
#include "correlator/stall_detector.h"

namespace stallwatch::correlator {

struct LiveConfig {
  DetectorConfig detector;
  double open_after_s = 3;
  // A stall with strong storage evidence (strongStorageEvidence: the job's reads at its io.max
  // limit, or its threads waiting on I/O at a device that got slow, named) is reported once it has
  // lasted this long: two intervals at one-second sampling, so that the page comes within 2 s
  // of the GPUs' work falling. Weaker evidence waits for open_after_s, which a burst of other
  // causes (a one-off slow step, a loader starting) does not outlast. 0 turns it off.
  double strong_open_after_s = 2;
  double close_after_s = 10;
  // A not-storage stall in which the job's progress stopped entirely with nothing holding it
  // (mayBeExit: no process stopped, no thread stuck in D) is reported only once it has lasted
  // this long: a job winding down lingers so before it exits (a DataLoader's worker shutdown:
  // 40-60 s on an H100, its workers busy for the first seconds), which is no stall, and the
  // live side cannot know the exit is coming. If it has not exited by then, it is a hang; a
  // stopped process or a thread stuck in D is one at once.
  double idle_open_after_s = 120;
  // ... and for its first exit_settle_s whatever its processes do: a job's workers finish their
  // prefetched batches for a few seconds after its last step. Past it, a stall whose processes
  // still read or compute as before (stillWorking) is no exit and is reported.
  double exit_settle_s = 10;
  // Intervals kept per job: the baseline plus the longest stall that can still be judged
  // against it. 3600 at one second is one hour, ~1 MB per job.
  size_t window_intervals = 3600;
  // The standing verdict (correlator/limiter.h) over the job's last limiter_intervals
  // intervals, judged again every limiter_every intervals; none while a stall is open (the
  // incident's account).
  size_t limiter_intervals = 60;
  size_t limiter_every = 5;
  LimiterConfig limiter;
};

using model::IncidentEvent;
using model::IncidentEventKind;

// A job's standing verdict over its last minute.
struct LiveLimiter {
  std::string job_key;
  std::string job_label;
  model::LimiterVerdict verdict;
};

struct ActiveStall {
  uint64_t live_id = 0;
  std::string job_key;
  std::string job_label;
  StallClass cls = StallClass::kNotStorage;
  std::string device;
  std::string physical_device;
  int64_t start_ms = 0;
  std::string rank;  // stallRankLabel: the straggler's rank, "all", or "" (one rank)
};

class LiveCorrelator {
 public:
  explicit LiveCorrelator(const LiveConfig& config = {});

  // One interval's samples (rates already computed). Returns the events this tick produced.
  std::vector<IncidentEvent> onBatch(const collectors::SampleBatch& batch);

  std::vector<ActiveStall> active() const;
  // Each job's verdict over its last minute, where one has been judged.
  std::vector<LiveLimiter> limiters() const;
  // New timing (a reload): from the next batch on; open incidents stay open.
  void setConfig(const LiveConfig& config);
  size_t jobsTracked() const { return jobs_.size(); }

 private:
  struct DeviceRef {
    std::string name;
    std::string via;
    bool operator<(const DeviceRef& o) const {
      return std::tie(name, via) < std::tie(o.name, o.via);
    }
  };
  struct Open {
    uint64_t live_id = 0;
    Incident incident;
    int64_t last_stalled_ms = 0;
  };
  struct JobState {
    explicit JobState(const DetectorConfig& config) : baseline(config) {}
    std::string label;
    JobSeries series;
    std::set<DeviceRef> devices;
    std::optional<Open> open;
    // A stall held back as the job's possible exit (mayBeExit): dropped if the job ends, paged
    // late if its progress comes back first (it was a hang, not the exit).
    std::optional<Incident> held;
    // The cheap path: judging each new interval against the running baseline decides whether
    // the full analysis (attribution) needs to run at all this tick.
    ProgressBaseline baseline;
    bool gpu_seen = false;
    bool work_seen = false;
    bool steps_seen = false;
    std::set<int32_t> ranks_with_gpu;  // ranks whose GPU gave a utilisation reading so far
    ProgressSignal signal = ProgressSignal::kNone;
    std::map<int32_t, collectors::RankDescription> rank_facts;
    size_t since_stalled = SIZE_MAX;  // intervals since the last stalled one
    size_t since_limiter = SIZE_MAX;  // intervals since the verdict was last judged
    std::optional<model::LimiterVerdict> limiter;
  };
  JobState& job(const std::string& key);
  void judgeNewest(JobState& job);
  // The job's standing verdict over its last limiter_intervals, every limiter_every intervals.
  void judgeLimiter(JobState& job);

  void append(JobState& job, const collectors::JobSample& sample,
              const collectors::SampleBatch& batch);
  void trim(JobSeries& s) const;
  // The host's disks over the last window, for the evidence of which disks were slow besides
  // the job's (the post-mortem reads the same from the recording).
  struct DiskPoint {
    int64_t ts_ms = 0;
    std::optional<double> r_await_ms, w_await_ms, aqu_sz, write_bytes_per_s;
  };
  void recordHostDisks(const collectors::SampleBatch& batch);
  // How far before an open stall (or now) the analysis looks: twice the baseline window, the
  // warm-up and the open/close delays.
  size_t tailMargin() const;
  void addOtherDevices(JobSeries& series,
                       const std::vector<std::pair<size_t, size_t>>& windows) const;
  // Fills D's intervals FROM..TO (exclusive) of SERIES from the host's disk samples; true if any.
  bool fillFromHost(const JobSeries& series, DeviceSeries& d, size_t from, size_t to) const;
  static IncidentEvent eventOf(IncidentEventKind kind, const std::string& key, const JobState& job,
                               int64_t ts_ms);
  std::optional<IncidentEvent> closeOf(const std::string& key, JobState& job, int64_t ts_ms,
                                       int64_t end_ms);

  LiveConfig config_;
  std::map<std::string, JobState> jobs_;
  std::map<std::string, std::deque<DiskPoint>> host_disks_;  // by device name
  uint64_t next_id_ = 1;
};

}  // namespace stallwatch::correlator
