#include "model/evidence.h"

#include <iterator>

#include "model/enum_table.h"

namespace stallwatch::model {
namespace {

struct MetricRow {
  EvidenceMetric metric;
  const char* stored;     // the name in incidents' JSON and in signals
  const char* qualifier;  // said after the subject, before the note: part of the kind
  const char* unit;
  const char* readable;  // the page's words; "" where the signal says it
};

using M = EvidenceMetric;
constexpr MetricRow kMetricRows[] = {
    {M::kUnknown, "", "", "", ""},
    {M::kAwaitMs, "await_ms", "", "ms", "await (ms)"},
    {M::kAquSz, "aqu_sz", "", "count", "queue length (aqu-sz)"},
    {M::kWriteBytesPerS, "write_bytes_per_s", "", "bytes_per_s", ""},
    {M::kNeighbourBytesPerS, "neighbour_bytes_per_s", "", "bytes_per_s",
     "another cgroup's or process's reads and writes on it (bytes/s)"},
    {M::kJobReadP99Ms, "read_p99_ms", "(the job's I/Os)", "ms",
     "99th percentile of each read's latency (ms)"},
    {M::kOthersReadP99Ms, "read_p99_ms", "(others' I/Os)", "ms",
     "99th percentile of each read's latency (ms)"},
    {M::kOthersShareOfReads, "others_share_of_reads", "", "share",
     "share of its reads that were others'"},
    {M::kCheckpointSlowedByAwaitMs, "checkpoint_slowed_by_await_ms", "", "ms", ""},
    {M::kCheckpointHeldByWriteLimit, "checkpoint_held_by_write_limit", "", "bytes_per_s", ""},
    {M::kIoSome, "io_some", "", "share", "I/O pressure: share of time some task waited"},
    {M::kCpuSome, "cpu_some", "", "share", "CPU pressure: share of time some task waited"},
    {M::kMemorySome, "memory_some", "", "share",
     "memory pressure: share of time some task waited (reclaim)"},
    {M::kJobCgroupReadBytesPerS, "job_cgroup_read_bytes_per_s", "", "bytes_per_s", ""},
    {M::kJobCgroupCpuThrottledShare, "job_cgroup_cpu_throttled_share", "", "share", ""},
    {M::kJobDStateThreads, "job_d_state_threads", "", "count",
     "the job's threads in uninterruptible I/O wait"},
    {M::kJobWriteBytesPerS, "job_write_bytes_per_s", "", "bytes_per_s",
     "the job's writes (bytes/s)"},
    {M::kJobProcessesStopped, "job_processes_stopped", "", "count", ""},
    {M::kJobProcessesIdle, "job_processes_idle", "", "share",
     "the job's processes idle (no CPU, reads or I/O wait): share of intervals its main "
     "thread slept there"},
    {M::kMainProcessAsleep, "main_process_asleep", "", "share", ""},
    {M::kWorkersAsleep, "workers_asleep", "", "share", ""},
    {M::kBaselineIntervals, "baseline_intervals", "", "count",
     "healthy intervals before it to compare with"},
    {M::kGpuUtilPercent, "gpu_util_percent", "", "percent", "GPU utilisation (%)"},
    {M::kDataWaitShare, "data_wait_share", "", "share", "share of the loop waiting for data"},
    {M::kCgroupReadShareOfIoMax, "cgroup_read_share_of_io_max", "", "share", ""},
    {M::kDStateThreads, "d_state_threads", "", "count", ""},
    {M::kCgroupCpuThrottledShare, "cgroup_cpu_throttled_share", "", "share", ""},
};
static_assert(std::size(kMetricRows) == kEvidenceMetricCount, "an evidence metric without its row");

static_assert(rowsInEnumOrder(kMetricRows, &MetricRow::metric),
              "kMetricRows out of EvidenceMetric's order");

const MetricRow& rowOf(EvidenceMetric metric) {
  const auto k = static_cast<size_t>(metric);
  return k < std::size(kMetricRows) ? kMetricRows[k] : kMetricRows[0];
}

constexpr const char* kScopeNames[] = {"host",    "job",  "device", "cgroup",
                                       "process", "rank", "node"};
static_assert(std::size(kScopeNames) == kEvidenceScopeCount, "an evidence scope without its name");

}  // namespace

const char* toString(EvidenceMetric metric) { return rowOf(metric).stored; }
const char* unitOf(EvidenceMetric metric) { return rowOf(metric).unit; }
const char* readableOf(EvidenceMetric metric) { return rowOf(metric).readable; }
const char* qualifierOf(EvidenceMetric metric) { return rowOf(metric).qualifier; }

const char* toString(EvidenceScope scope) {
  const auto k = static_cast<size_t>(scope);
  return k < std::size(kScopeNames) ? kScopeNames[k] : "host";
}

std::string EvidenceName::remark() const {
  std::string out = qualifierOf(metric);
  if (!note.empty()) out += (out.empty() ? "" : " ") + note;
  return out;
}

std::string EvidenceName::subjectText() const {
  if (subject.empty()) return "";
  if (scope == EvidenceScope::kRank || scope == EvidenceScope::kNode)
    return std::string(toString(scope)) + " " + subject;
  return subject;
}

std::string displayName(const EvidenceName& n) {
  std::string out = toString(n.metric);
  if (const std::string of = n.subjectText(); !of.empty()) out += " " + of;
  if (const std::string remark = n.remark(); !remark.empty()) out += " " + remark;
  return out;
}

EvidenceName evidenceNameFromStored(std::string_view metric, std::string_view scope,
                                    std::string subject, std::string_view note) {
  EvidenceName name;
  name.subject = std::move(subject);
  name.note = std::string(note);
  for (size_t k = 0; k < std::size(kScopeNames); ++k)
    if (scope == kScopeNames[k]) name.scope = static_cast<EvidenceScope>(k);
  for (const MetricRow& row : kMetricRows) {
    if (metric.empty() || metric != row.stored) continue;
    const std::string_view qualifier = row.qualifier;
    if (!note.starts_with(qualifier)) continue;
    name.metric = row.metric;
    note.remove_prefix(qualifier.size());
    if (note.starts_with(' ')) note.remove_prefix(1);
    name.note = std::string(note);
    break;
  }
  return name;
}

}  // namespace stallwatch::model
