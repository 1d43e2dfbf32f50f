// What the post-mortem of one job found, as plain records: its analysis (incidents, the spans
// that are not stalls, progress and baseline per interval), its goodput, the holes in its
// samples, its devices' latency and its ranks' figures. The correlator computes them
// (stall_detector.h, postmortem.h); the report library gathers them and render/ says them,
// neither needing the correlator's code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/incident.h"
#include "model/series.h"

namespace stallwatch::model {

// The end of a job that winds down: after its last progress its GPUs sat idle while its
// processes wound down (joined their workers, flushed, logged, or did nothing) until they
// exited. Not a stall: not an incident, not lost time (issue 16: a DataLoader's worker
// shutdown lingered a minute and was reported as a 62 s not-storage stall; issue 48: the same
// after a hang earlier in the run, or with the workers busy for the exit's first seconds).
struct IdleSpan {
  int64_t start_ms = 0, end_ms = 0;
  double workers_cpu = 0;        // median over the span, cores
  double main_cpu = 0;           // median over the span, cores
  double read_bytes_per_s = 0;   // median over the span
  double write_bytes_per_s = 0;  // median over the span
  bool processes_idle = false;   // processesIdle over the span
};

// A phase outside the loop the job reports from: it sent no step at all while its processes
// kept working (its workers' CPU and reads near their training level), as an evaluation
// does. The steps cannot judge it, so it is not a stall (issue 16: a 15 s evaluation was a
// not-storage stall); said with what the job and its GPUs did meanwhile.
struct WorkSpan {
  int64_t start_ms = 0, end_ms = 0;
  double workers_cpu = 0, workers_cpu_before = 0;            // medians, cores
  double read_bytes_per_s = 0, read_bytes_per_s_before = 0;  // medians
  std::optional<double> gpu_share;  // the GPUs' work (or utilisation) against before, 0..1+
};

// A span the detector found below the job's baseline that is no incident because nothing shows
// the job was better before it (issue 41: a limit in force from the first second): too few
// healthy intervals before it while an io.max held the job's reads through it (a limit from the
// first second), or an io-throttled stall whose limit already held them over its baseline. The
// run's limiter judges it with the rest.
struct StandingSpan {
  int64_t start_ms = 0, end_ms = 0;
  StallClass cls = StallClass::kNotStorage;
  bool no_baseline = false;  // too few healthy intervals before it and the limit held through it
                             // (else: the limit held over its baseline too)
};

struct Analysis {
  std::vector<Incident> incidents;
  std::vector<StandingSpan> standing;
  std::optional<IdleSpan> idle_at_exit;
  std::vector<WorkSpan> outside_loop;
  uint64_t blips = 0;
  std::vector<bool> stalled;                    // per interval
  std::vector<std::optional<double>> baseline;  // progress baseline per interval
  std::vector<std::optional<double>> progress;  // progress per interval, by progress_signal
  double gpu_seconds_total = 0;
  double gpu_seconds_lost[kStallClassCount] = {};
  ProgressSignal progress_signal = ProgressSignal::kNone;  // kNone: nothing to judge by
};

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

}  // namespace stallwatch::model
