#pragma once
// Every I/O's latency, through eBPF (issue 33): the block layer's issue and completion
// tracepoints feed histograms in the kernel keyed by device, operation and cgroup
// (collectors/io_latency/bpf/io_latency.bpf.c); each tick this collector reads them (the program
// never resets them: the difference from the last read, collectors/io_latency/histogram_table.h),
// and says per device and operation the followed jobs' I/O apart from everyone else's. Where BPF
// cannot be used (not root, no CAP_BPF and CAP_PERFMON, no BTF, a build without it, a captured
// root) it says why once and collects nothing; the rest of the agent is unchanged.

#include <memory>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

std::unique_ptr<Collector> makeIoLatencyCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
