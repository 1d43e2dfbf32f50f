#include "collectors/counter_rates.h"

#include <algorithm>

namespace stallwatch::collectors {

uint64_t forwardDelta(uint64_t previous, uint64_t current) {
  return current - std::min(current, previous);
}

std::optional<double> perSecond(double amount, double elapsed_seconds) {
  if (!(elapsed_seconds > 0)) return std::nullopt;
  return amount / elapsed_seconds;
}
namespace {

constexpr uint64_t k32BitWrap = uint64_t{1} << 32;

// Δ per second of an optional counter (a field older kernels lack); none when either reading
// lacks it or it went backwards (a reset: no figure rather than a made-up one).
std::optional<double> optionalPerSecond(const std::optional<uint64_t>& previous,
                                        const std::optional<uint64_t>& current,
                                        double elapsed_seconds) {
  if (!previous || !current || *current < *previous) return std::nullopt;
  return perSecond(static_cast<double>(*current - *previous), elapsed_seconds);
}

// Δ time / Δ count, or none when nothing completed in the interval.
std::optional<double> await(uint64_t delta_ms, uint64_t delta_count) {
  if (delta_count == 0) return std::nullopt;
  return static_cast<double>(delta_ms) / static_cast<double>(delta_count);
}

std::optional<double> optionalAwait(const std::optional<uint64_t>& prev_ms,
                                    const std::optional<uint64_t>& cur_ms,
                                    const std::optional<uint64_t>& prev_count,
                                    const std::optional<uint64_t>& cur_count) {
  if (!prev_ms || !cur_ms || !prev_count || !cur_count || *cur_count < *prev_count) {
    return std::nullopt;
  }
  return await(deltaWrapping32(*prev_ms, *cur_ms), *cur_count - *prev_count);
}

}  // namespace

uint64_t deltaWrapping32(uint64_t previous, uint64_t current) {
  if (current >= previous) return current - previous;
  return current + k32BitWrap - previous;
}

DiskRatesResult computeDiskRates(const DiskStats& previous, const DiskStats& current,
                                 double elapsed_seconds) {
  if (!(elapsed_seconds > 0)) return {std::nullopt, RateGap::kNoTimeElapsed};
  if (current.reads_completed < previous.reads_completed ||
      current.writes_completed < previous.writes_completed ||
      current.read_sectors < previous.read_sectors ||
      current.write_sectors < previous.write_sectors) {
    return {std::nullopt, RateGap::kCounterReset};
  }
  const uint64_t reads = current.reads_completed - previous.reads_completed;
  const uint64_t writes = current.writes_completed - previous.writes_completed;
  const double elapsed_ms = elapsed_seconds * 1000.0;

  DiskRates r;
  r.reads_per_second = static_cast<double>(reads) / elapsed_seconds;
  r.writes_per_second = static_cast<double>(writes) / elapsed_seconds;
  r.read_bytes_per_second = static_cast<double>((current.read_sectors - previous.read_sectors) *
                                                collectors::kSectorBytes) /
                            elapsed_seconds;
  r.write_bytes_per_second = static_cast<double>((current.write_sectors - previous.write_sectors) *
                                                 collectors::kSectorBytes) /
                             elapsed_seconds;
  r.r_await_ms = await(deltaWrapping32(previous.read_time_ms, current.read_time_ms), reads);
  r.w_await_ms = await(deltaWrapping32(previous.write_time_ms, current.write_time_ms), writes);
  r.discards_per_second =
      optionalPerSecond(previous.discards_completed, current.discards_completed, elapsed_seconds);
  r.d_await_ms = optionalAwait(previous.discard_time_ms, current.discard_time_ms,
                               previous.discards_completed, current.discards_completed);
  r.flushes_per_second =
      optionalPerSecond(previous.flushes_completed, current.flushes_completed, elapsed_seconds);
  r.f_await_ms = optionalAwait(previous.flush_time_ms, current.flush_time_ms,
                               previous.flushes_completed, current.flushes_completed);
  r.aqu_sz = static_cast<double>(
                 deltaWrapping32(previous.weighted_io_time_ms, current.weighted_io_time_ms)) /
             elapsed_ms;
  // io_ticks can run a little ahead of the wall interval (jiffies granularity); iostat caps it.
  r.util_percent = std::min(
      100.0, static_cast<double>(deltaWrapping32(previous.io_ticks_ms, current.io_ticks_ms)) /
                 elapsed_ms * 100.0);
  return {r, RateGap::kNone};
}

std::optional<double> stallRatio(uint64_t previous_total_us, uint64_t current_total_us,
                                 double elapsed_seconds) {
  if (!(elapsed_seconds > 0) || current_total_us < previous_total_us) return std::nullopt;
  const double ratio =
      static_cast<double>(current_total_us - previous_total_us) / (elapsed_seconds * 1e6);
  return std::clamp(ratio, 0.0, 1.0);
}

NfsRatesResult computeNfsRates(const NfsMountStats& previous, const NfsMountStats& current,
                               double elapsed_seconds) {
  NfsRatesResult result;
  if (!(elapsed_seconds > 0)) {
    result.gap = RateGap::kNoTimeElapsed;
    return result;
  }
  if (previous.age_seconds && current.age_seconds && *current.age_seconds < *previous.age_seconds) {
    result.gap = RateGap::kCounterReset;
    return result;
  }
  DiskRates rates;
  NfsRates nfs;
  uint64_t execute_ms = 0, retransmissions = 0, timeouts = 0, metadata_ops = 0, metadata_ms = 0;
  for (size_t k = 0; k < current.ops.size(); ++k) {
    const NfsOpCounters& now = current.ops[k];
    // The kernel prints the ops in one order: the same place first, a search if it moved.
    const NfsOpCounters* before = k < previous.ops.size() && previous.ops[k].name == now.name
                                      ? &previous.ops[k]
                                      : previous.op(now.name);
    if (!before) continue;
    if (now.ops < before->ops || now.transmissions < before->transmissions ||
        now.timeouts < before->timeouts || now.bytes_sent < before->bytes_sent ||
        now.bytes_received < before->bytes_received || now.rtt_ms < before->rtt_ms ||
        now.execute_ms < before->execute_ms) {
      continue;  // reset, or a counter the kernel printed wrapped: no figure from it
    }
    const uint64_t ops = now.ops - before->ops;
    const uint64_t exe = now.execute_ms - before->execute_ms;
    const uint64_t rtt = now.rtt_ms - before->rtt_ms;
    execute_ms += exe;
    timeouts += now.timeouts - before->timeouts;
    const uint64_t sends = now.transmissions - before->transmissions;
    retransmissions += sends - std::min(sends, ops);
    const double ops_per_second = static_cast<double>(ops) / elapsed_seconds;
    if (now.name == "READ") {
      rates.reads_per_second = ops_per_second;
      rates.read_bytes_per_second =
          static_cast<double>(now.bytes_received - before->bytes_received) / elapsed_seconds;
      rates.r_await_ms = await(exe, ops);
      nfs.read_rtt_ms = await(rtt, ops);
    } else if (now.name == "WRITE") {
      rates.writes_per_second = ops_per_second;
      rates.write_bytes_per_second =
          static_cast<double>(now.bytes_sent - before->bytes_sent) / elapsed_seconds;
      rates.w_await_ms = await(exe, ops);
      nfs.write_rtt_ms = await(rtt, ops);
    } else if (now.name != "COMMIT" && now.name != "NULL") {
      metadata_ops += ops;
      metadata_ms += exe;
    }
  }
  rates.aqu_sz = static_cast<double>(execute_ms) / (elapsed_seconds * 1000.0);
  nfs.metadata_ops_per_second = static_cast<double>(metadata_ops) / elapsed_seconds;
  nfs.metadata_await_ms = await(metadata_ms, metadata_ops);
  nfs.retransmissions_per_second = static_cast<double>(retransmissions) / elapsed_seconds;
  nfs.timeouts_per_second = static_cast<double>(timeouts) / elapsed_seconds;
  result.rates = rates;
  result.nfs = nfs;
  return result;
}

}  // namespace stallwatch::collectors
