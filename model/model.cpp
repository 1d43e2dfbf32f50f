#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <tuple>

#include "model/enum_table.h"
#include "model/fleet.h"
#include "model/incident.h"
#include "model/limiter.h"
#include "model/node_sample.h"
#include "model/run.h"
#include "model/series.h"

namespace stallwatch::model {
namespace {

template <typename T>
void dropFrontOf(std::vector<T>& v, size_t n) {
  v.erase(v.begin(), v.begin() + static_cast<long>(std::min(n, v.size())));
}

// Where a device sits in the one order: the job's before the host's others; among the job's,
// those it reads directly before those only under another device; then by name.
auto deviceOrder(const DeviceSeries& d) {
  return std::make_tuple(!d.job_reads, !d.direct(), d.name);
}

}  // namespace

NodeSample nodeSampleAt(const JobSeries& s, size_t i) {
  NodeSample x;
  x.ts_ms = s.ts_ms[i];
  x.interval_s = s.interval_s[i];
  x.steps = at(s.steps, i);
  x.gpu_util_percent = at(s.gpu_util_percent, i);
  x.gpu_work_percent = at(s.gpu_work_percent, i);
  x.data_wait_s = at(s.data_wait_s, i);
  x.read_bytes_per_s = at(s.read_bytes_per_s, i);
  x.write_bytes_per_s = at(s.write_bytes_per_s, i);
  x.workers_cpu = at(s.workers_cpu, i);
  x.d_state_threads = at(s.d_state_threads, i);
  x.io_some = at(s.io_some, i);
  x.cpu_some = at(s.cpu_some, i);
  if (!s.ranks.empty()) {
    const RankSeries& r = s.ranks.front();
    x.rank_gpu_util_percent = at(r.gpu_util_percent, i);
    x.rank_gpu_work_percent = at(r.gpu_work_percent, i);
    x.rank_data_wait_s = at(r.data_wait_s, i);
  }
  return x;
}

size_t appendInterval(JobSeries& s, int64_t ts_ms, double interval_s) {
  s.ts_ms.push_back(ts_ms);
  s.interval_s.push_back(interval_s);
  s.forEachSeries([](Series& x) { x.emplace_back(); });
  s.forEachText([&](std::vector<std::string>& x) { x.resize(s.ts_ms.size()); });
  return s.ts_ms.size() - 1;
}

DeviceSeries& addDevice(JobSeries& s, const std::string& name, const std::string& via,
                        bool job_reads) {
  auto same = std::find_if(s.devices.begin(), s.devices.end(),
                           [&](const DeviceSeries& d) { return d.name == name; });
  if (same != s.devices.end()) {
    if (!job_reads || !same->job_reads || same->via == via) return *same;
    // Both where some of the job's files are and under a device holding others (vda under
    // loop0, with the job's scripts on vda): one series, both relations.
    if (same->via.empty()) {
      same->via = via;
      same->also_direct = true;
    } else if (via.empty()) {
      same->also_direct = true;
    }
  } else {
    DeviceSeries d;
    d.name = name;
    d.via = via;
    d.job_reads = job_reads;
    d.forEachSeries([&](Series& x) { x.assign(s.size(), std::nullopt); });
    s.devices.push_back(std::move(d));
  }
  std::stable_sort(
      s.devices.begin(), s.devices.end(),
      [](const DeviceSeries& a, const DeviceSeries& b) { return deviceOrder(a) < deviceOrder(b); });
  return *std::find_if(s.devices.begin(), s.devices.end(),
                       [&](const DeviceSeries& d) { return d.name == name; });
}

RankSeries& addRank(JobSeries& s, int32_t rank) {
  auto at = std::lower_bound(s.ranks.begin(), s.ranks.end(), rank,
                             [](const RankSeries& r, int32_t value) { return r.rank < value; });
  if (at != s.ranks.end() && at->rank == rank) return *at;
  RankSeries fresh;
  fresh.rank = rank;
  fresh.forEachSeries([&](Series& x) { x.assign(s.size(), std::nullopt); });
  return *s.ranks.insert(at, std::move(fresh));
}

void dropFront(JobSeries& s, size_t n) {
  dropFrontOf(s.ts_ms, n);
  dropFrontOf(s.interval_s, n);
  s.forEachText([&](std::vector<std::string>& x) { dropFrontOf(x, n); });
  s.forEachSeries([&](Series& x) { dropFrontOf(x, n); });
}

JobSeries tailOf(const JobSeries& s, size_t first) {
  // Copies only the tail: the live correlator cuts one from an hour's window while a stall is on.
  JobSeries t;
  t.gpu_count = s.gpu_count;
  for (const auto& d : s.devices) {
    DeviceSeries e;
    e.name = d.name;
    e.via = d.via;
    e.job_reads = d.job_reads;
    e.also_direct = d.also_direct;
    t.devices.push_back(std::move(e));
  }
  for (const auto& r : s.ranks) {
    RankSeries e;
    e.rank = r.rank;
    e.pid = r.pid;
    e.gpu = r.gpu;
    t.ranks.push_back(std::move(e));
  }
  auto from = [first](const auto& v) {
    return std::vector(v.begin() + static_cast<long>(std::min(first, v.size())), v.end());
  };
  t.ts_ms = from(s.ts_ms);
  t.interval_s = from(s.interval_s);
  std::vector<const std::vector<std::string>*> texts;
  s.forEachText([&](const std::vector<std::string>& x) { texts.push_back(&x); });
  size_t text = 0;
  t.forEachText([&](std::vector<std::string>& x) { x = from(*texts[text++]); });
  // forEachSeries visits both in the same order.
  std::vector<const Series*> source;
  s.forEachSeries([&](const Series& x) { source.push_back(&x); });
  size_t k = 0;
  t.forEachSeries([&](Series& x) { x = from(*source[k++]); });
  return t;
}

const char* toString(ProgressSignal signal) {
  switch (signal) {
    case ProgressSignal::kNone:
      return "";
    case ProgressSignal::kSteps:
      return "steps";
    case ProgressSignal::kGpuWork:
      return "gpu_work";
    case ProgressSignal::kSlowestRankGpuUtil:
      return "gpu_util_slowest_rank";
    case ProgressSignal::kGpuUtil:
      return "gpu_util";
  }
  return "";
}

const char* toString(Limiter limiter) {
  switch (limiter) {
    case Limiter::kGpu:
      return "gpu";
    case Limiter::kInputCpu:
      return "input-cpu";
    case Limiter::kInputWorkers:
      return "input-workers";
    case Limiter::kInputStorage:
      return "input-storage";
    case Limiter::kIoThrottled:
      return "io-throttled";
    case Limiter::kHost:
      return "host";
    case Limiter::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<Limiter> limiterNamed(std::string_view name) {
  for (int k = 0; k < kLimiterCount; ++k) {
    const auto limiter = static_cast<Limiter>(k);
    if (name == toString(limiter)) return limiter;
  }
  return std::nullopt;
}

const char* toString(WaitSource source) {
  switch (source) {
    case WaitSource::kHook:
      return "hook";
    case WaitSource::kSampled:
      return "main_thread_sampled";
    case WaitSource::kMainThread:
      return "main_thread";
    case WaitSource::kNone:
      break;
  }
  return "";
}

namespace {

// Every figure kind: its name in every output and its unit, in FigureKind's order.
struct FigureRow {
  FigureKind kind;
  const char* name;
  const char* unit;
};
constexpr FigureRow kFigureRows[] = {
    {FigureKind::kInputWaitShare, "input_wait_share", "share"},
    {FigureKind::kInputWaitBetween, "input_wait_between", "share"},
    {FigureKind::kInputWaitShareLow, "input_wait_share_low", "share"},
    {FigureKind::kInputWaitShareHigh, "input_wait_share_high", "share"},
    {FigureKind::kNoWaitFigures, "no_wait_figures", ""},
    {FigureKind::kNoProgress, "no_progress", ""},
    {FigureKind::kPinMemory, "pin_memory", "flag"},
    {FigureKind::kMainThreadFutexWaitShare, "main_thread_futex_wait_share", "share"},
    {FigureKind::kMainThreadCpu, "main_thread_cpu", "cores"},
    {FigureKind::kMainThreadRunqueue, "main_thread_runqueue", "share"},
    {FigureKind::kMainThreadGpuSyncShare, "main_thread_gpu_sync_share", "share"},
    {FigureKind::kGpuIdleShare, "gpu_idle_share", "share"},
    {FigureKind::kMemorySome, "memory_some", "share"},
    {FigureKind::kWorkers, "workers", "count"},
    {FigureKind::kWorkersCpuCores, "workers_cpu_cores", "cores"},
    {FigureKind::kWorkersCpuPerWorker, "workers_cpu_per_worker", "cores"},
    {FigureKind::kDStateThreadsPerWorker, "d_state_threads_per_worker", "count"},
    {FigureKind::kDeviceQueuePerWorker, "device_queue_per_worker", "count"},
    {FigureKind::kHostCpusOnline, "host_cpus_online", "count"},
    {FigureKind::kHostCpusBusy, "host_cpus_busy", "cores"},
    {FigureKind::kJobCpusAllowed, "job_cpus_allowed", "count"},
    {FigureKind::kCpusFree, "cpus_free", "cores"},
    {FigureKind::kCgroupCpuThrottledShare, "cgroup_cpu_throttled_share", "share"},
    {FigureKind::kDeviceBusyPercent, "device_busy_percent", "percent"},
    {FigureKind::kReadAwaitMs, "r_await_ms", "ms"},
    {FigureKind::kQueueSize, "aqu_sz", "count"},
    {FigureKind::kDeviceReadBytesPerS, "read_bytes_per_s", "bytes/s"},
    {FigureKind::kDStateWait, "d_state_wait", "flag"},
    {FigureKind::kJobCgroupReadBytesPerS, "job_cgroup_read_bytes_per_s", "bytes/s"},
    {FigureKind::kIoMaxReadBytesPerS, "io_max_read_bytes_per_s", "bytes/s"},
    {FigureKind::kShareOfTimeAtIoMax, "share_of_time_at_io_max", "share"},
    {FigureKind::kAgentReadingsNamingIt, "agent_readings_naming_it", "share"},
};
static_assert(std::size(kFigureRows) == kFigureKindCount, "a figure kind without its row");

static_assert(rowsInEnumOrder(kFigureRows, &FigureRow::kind),
              "kFigureRows out of FigureKind's order");

const FigureRow& rowOf(FigureKind kind) { return kFigureRows[static_cast<size_t>(kind)]; }

}  // namespace

const char* toString(FigureKind kind) { return rowOf(kind).name; }
const char* unitOf(FigureKind kind) { return rowOf(kind).unit; }

std::string LimiterFigure::name() const {
  std::string out = toString(kind);
  if (!subject.empty()) out += " " + subject;
  if (!note.empty()) out += " " + note;
  return out;
}

const char* toString(AdviceKind kind) {
  switch (kind) {
    case AdviceKind::kMoreWorkers:
      return "more-workers";
    case AdviceKind::kFasterStorage:
      return "faster-storage";
    case AdviceKind::kPageCache:
      return "page-cache";
    case AdviceKind::kRaiseCpuQuota:
      return "raise-cpu-quota";
    case AdviceKind::kFasterDecoding:
      return "faster-decoding";
    case AdviceKind::kLargerPrefetch:
      return "larger-prefetch";
    case AdviceKind::kFreeHostCpus:
      return "free-host-cpus";
    case AdviceKind::kMoveMainThreadWork:
      return "move-main-thread-work";
    case AdviceKind::kMoreMemory:
      return "more-memory";
    case AdviceKind::kRaiseReadLimit:
      return "raise-read-limit";
  }
  return "";
}

EvidenceItem evidenceItem(EvidenceName name, double baseline, double during, bool supports) {
  EvidenceItem e;
  e.signal = displayName(name);
  e.baseline = baseline;
  e.during = during;
  e.supports = supports;
  e.name = std::move(name);
  return e;
}

void addNote(EvidenceItem& item, const std::string& note) {
  item.name.note = item.name.note.empty() ? note : item.name.note + " " + note;
  item.signal += " " + note;
}

const char* toString(StallClass c) {
  switch (c) {
    case StallClass::kDiskSlow:
      return "disk-slow";
    case StallClass::kIoThrottled:
      return "io-throttled";
    case StallClass::kInputCpu:
      return "input-cpu";
    case StallClass::kCheckpoint:
      return "checkpoint";
    case StallClass::kNotStorage:
      return "not-storage";
  }
  return "?";
}

StallClass stallClassFromString(const std::string& text) {
  for (int c = 0; c < kStallClassCount; ++c) {
    if (text == toString(static_cast<StallClass>(c))) return static_cast<StallClass>(c);
  }
  return StallClass::kNotStorage;
}

const char* toString(IncidentEventKind kind) {
  switch (kind) {
    case IncidentEventKind::kOpen:
      return "open";
    case IncidentEventKind::kChange:
      return "change";
    case IncidentEventKind::kClose:
      return "close";
  }
  return "?";
}

}  // namespace stallwatch::model

namespace stallwatch::model {
namespace {

// The value of NAME in "K=V,K=V"; none if absent.
std::optional<std::string> labelValue(const std::string& labels, const std::string& name) {
  size_t at = 0;
  while (at <= labels.size()) {
    const size_t end = std::min(labels.find(',', at), labels.size());
    const std::string item = labels.substr(at, end - at);
    if (item.size() > name.size() && item.compare(0, name.size(), name) == 0 &&
        item[name.size()] == '=') {
      return item.substr(name.size() + 1);
    }
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::string runKeyOf(const std::string& job_key, const std::string& labels) {
  for (const char* prefix : {"slurm:", "torchelastic:", "dist:"}) {
    if (job_key.rfind(prefix, 0) == 0) return job_key;
  }
  if (auto slurm = labelValue(labels, "SLURM_JOB_ID")) {
    const auto step = labelValue(labels, "SLURM_STEP_ID");
    return "slurm:" + *slurm + (step ? "." + *step : "");
  }
  if (auto run = labelValue(labels, "TORCHELASTIC_RUN_ID")) return "torchelastic:" + *run;
  return {};
}

std::optional<int32_t> labelNumber(const std::string& labels, const std::string& name) {
  const auto text = labelValue(labels, name);
  if (!text || text->empty() || text->size() > 9 ||
      text->find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return static_cast<int32_t>(std::stol(*text));
}

std::optional<int32_t> believableWorldSize(int64_t value) {
  if (value <= 0 || value > kMaxWorldSize) return std::nullopt;
  return static_cast<int32_t>(value);
}

std::optional<int32_t> worldSizeOf(const std::string& labels) {
  const auto n = labelNumber(labels, "WORLD_SIZE");
  return n ? believableWorldSize(*n) : std::nullopt;
}

float NodeColumns::compact(const std::optional<double>& v) {
  return v ? static_cast<float>(*v) : kNone;
}

std::optional<double> NodeColumns::at(Column c, size_t i) const {
  const auto& v = values[c];
  if (i >= v.size() || std::isnan(v[i])) return std::nullopt;
  return static_cast<double>(v[i]);
}

Series NodeColumns::series(Column c, size_t from, size_t to) const {
  Series out;
  out.reserve(to + 1 - from);
  for (size_t i = from; i <= to; ++i) out.push_back(at(c, i));
  return out;
}

}  // namespace stallwatch::model
