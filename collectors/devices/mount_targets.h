// The figures of the storage targets that are mounts no block device serves, per interval:
//   NFS:  /proc/self/mountstats, nfsiostat's arithmetic (counter_rates.h), per mount point;
//   FUSE: /sys/fs/fuse/connections/<N>/waiting (the requests waiting for the daemon, a queue
//         like aqu-sz), N being the minor of the mount's device number (fs/fuse/control.c).
// Both are kernel counters in memory: reading them never waits on the server or the daemon.
// Overlays have no figures of their own; the devices under their layers have.
#pragma once

#include <memory>

#include "collectors/collector.h"
#include "collectors/system_root.h"

namespace stallwatch::collectors {

std::unique_ptr<Collector> makeMountTargetsCollector(const SystemRoot& root);

}  // namespace stallwatch::collectors
