// Rates from two readings of cumulative kernel counters: the one place where iostat's
// arithmetic lives, so the live agent and any replay compute the same figures.
#pragma once

#include <cstdint>
#include <optional>

#include "collectors/devices/diskstats.h"
#include "collectors/devices/mountstats.h"
#include "collectors/samples.h"

namespace stallwatch::collectors {

// Δ of a counter the kernel prints as a 32-bit unsigned int (diskstats' millisecond fields):
// a smaller current value is a wrap at 2^32, as sysstat treats it.
uint64_t deltaWrapping32(uint64_t previous, uint64_t current);

// Δ of a 64-bit cumulative counter that only goes forward while its owner lives (a process's
// I/O bytes or CPU ticks): a smaller current value (the pid was reused) counts as none, 0.
uint64_t forwardDelta(uint64_t previous, uint64_t current);

// AMOUNT per second over ELAPSED_SECONDS; none when no time elapsed (the first reading).
std::optional<double> perSecond(double amount, double elapsed_seconds);

// Why no rates came out of a pair of readings.
enum class RateGap { kNone, kNoTimeElapsed, kCounterReset };

struct DiskRatesResult {
  std::optional<DiskRates> rates;
  RateGap gap = RateGap::kNone;
};

// iostat -x's definitions (sysstat, iostat.c): r/s = Δreads / Δt, rkB/s = Δsectors·512 / Δt,
// r_await = Δ ms reading / Δ reads (none when Δ reads is 0), aqu-sz = Δ weighted ms / Δt(ms),
// %util = Δ io_ticks / Δt(ms) · 100. A 64-bit count that went backwards means the device was
// replaced or its counters reset: no rates for that interval.
DiskRatesResult computeDiskRates(const DiskStats& previous, const DiskStats& current,
                                 double elapsed_seconds);

struct NfsRatesResult {
  std::optional<DiskRates> rates;
  std::optional<NfsRates> nfs;
  RateGap gap = RateGap::kNone;
};

// nfsiostat's definitions (nfs-utils, tools/nfs-iostat/nfs-iostat.py, __print_rpc_op_stats):
// per op, ops/s = Δops / Δt, kB/s = Δbytes / Δt, avg RTT = Δrtt / Δops, avg exe = Δexecute /
// Δops, retrans = Δ(transmissions - ops). r_await/w_await are READ's/WRITE's avg exe, as
// iostat's await is the caller's whole wait; read bytes are READ's bytes received, written
// bytes WRITE's bytes sent. aqu_sz = Σ Δexecute(ms) / Δt(ms): the RPCs outstanding on average.
// An op whose counters went backwards is left out of the interval; a mount whose age went
// backwards (remounted) gives no rates.
NfsRatesResult computeNfsRates(const NfsMountStats& previous, const NfsMountStats& current,
                               double elapsed_seconds);

// Share of an interval spent stalled, from PSI's cumulative `total=` microseconds.
// Clamped to [0, 1]: PSI's per-CPU aggregation can overshoot the wall interval slightly.
std::optional<double> stallRatio(uint64_t previous_total_us, uint64_t current_total_us,
                                 double elapsed_seconds);

}  // namespace stallwatch::collectors
