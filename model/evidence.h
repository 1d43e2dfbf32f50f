// What a piece of evidence measured, typed (issue 45): the measure as an enum whose stored name,
// words and unit are one row of a table, what it is of (a device, a rank, a node, a cgroup...),
// and a remark. Stored incidents keep the names; they are turned into kinds once, where storage
// reads them. A new signal is a new kind and its row.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace stallwatch::model {

enum class EvidenceMetric : uint8_t {
  kUnknown,  // a name this version does not know (a newer recording): its signal says it
  // A device's figures.
  kAwaitMs,
  kAquSz,
  kWriteBytesPerS,
  kNeighbourBytesPerS,  // subject the device, note the neighbour
  kJobReadP99Ms,        // the eBPF collector's: the job's own reads
  kOthersReadP99Ms,     // everyone else's reads of the device
  kOthersShareOfReads,
  kCheckpointSlowedByAwaitMs,
  kCheckpointHeldByWriteLimit,  // note: the limit
  // Pressure, the host's or the job's cgroup's.
  kIoSome,
  kCpuSome,
  kMemorySome,
  // The job's.
  kJobCgroupReadBytesPerS,  // at its io.max: note the limit
  kJobCgroupCpuThrottledShare,
  kJobDStateThreads,
  kJobWriteBytesPerS,
  kJobProcessesStopped,
  kJobProcessesIdle,   // note: where its main thread slept
  kMainProcessAsleep,  // note: "in WAIT (subsystem)"
  kWorkersAsleep,
  kBaselineIntervals,
  // Each rank's (or, across nodes, each node's).
  kGpuUtilPercent,
  kDataWaitShare,
  kCgroupReadShareOfIoMax,
  kDStateThreads,
  kCgroupCpuThrottledShare,
};
inline constexpr int kEvidenceMetricCount = 27;

// What the evidence is of: its subject is a device's name, a rank's number, a node's name...
enum class EvidenceScope : uint8_t { kHost, kJob, kDevice, kCgroup, kProcess, kRank, kNode };
inline constexpr int kEvidenceScopeCount = 7;

const char* toString(EvidenceMetric metric);  // the stored name: "await_ms"; "" for kUnknown
const char* unitOf(EvidenceMetric metric);    // "ms", "share", "bytes_per_s", "count"... or ""
// The words for people ("await (ms)"), or "" where the signal's name says it best.
const char* readableOf(EvidenceMetric metric);
// A remark the kind always carries, between the subject and the note: "(the job's I/Os)".
const char* qualifierOf(EvidenceMetric metric);
const char* toString(EvidenceScope scope);  // "device", "rank", ...

struct EvidenceName {
  EvidenceMetric metric = EvidenceMetric::kUnknown;
  EvidenceScope scope = EvidenceScope::kHost;
  std::string subject;  // within the scope: "loop0", "1", "/stallwatch/neighbour"; "" for job, host
  std::string note;  // "(the job does not read it)", "waiting in folio_wait_bit_common (block I/O)"

  // The kind's qualifier and the note, as stored: "(the job's I/Os)", "at io.max 7:1 rbps=...".
  std::string remark() const;
  // "rank 1", "node n07", "loop0": the subject as people read it ("" for job and host).
  std::string subjectText() const;
};
// "await_ms loop0 (the job does not read it)", "gpu_util_percent rank 1": how people read it.
std::string displayName(const EvidenceName& name);

// The name stored as METRIC, SCOPE and NOTE (the JSON's fields), typed: the kind whose stored
// name is METRIC and whose qualifier starts NOTE (then taken off it); kUnknown and the host for
// names this version does not know.
EvidenceName evidenceNameFromStored(std::string_view metric, std::string_view scope,
                                    std::string subject, std::string_view note);

}  // namespace stallwatch::model
