// Who else uses a job's device when cgroups cannot tell: everything in one cgroup (a container
// whose sidecar shares it, a host where all runs in the root cgroup), so that no other cgroup's
// io.stat shows the bytes (issue 16: "neighbours are named by cgroup; on a host where everything
// runs in one, none is named"). The users are processes, from /proc/PID/io (read_bytes,
// write_bytes: what each submitted to the block layer, direct I/O included), grouped by command
// name so that a loop that starts a new reader every pass stays one user.
//
// Walking every process's io file costs ~5 us a process, so it is done only while a job's device
// moves bytes that neither the job nor another cgroup accounts for (JobTracker::
// addProcessNeighbours), once per discovery period; the rates come from two walks in a row.
// /proc/PID/io does not say which device the bytes went to: a user is named on a device only if it
// holds a file there.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stallwatch::collectors {

// One process at one walk.
struct ProcessIoReading {
  std::string comm;
  uint64_t read_bytes = 0, write_bytes = 0;
};

// The processes of one command between two walks: their bytes/s, and their pids, busiest first.
struct CommandIo {
  std::string comm;
  std::vector<uint32_t> pids;
  double read_bytes_per_second = 0, write_bytes_per_second = 0;
  double bytes_per_second() const { return read_bytes_per_second + write_bytes_per_second; }
};

// The TOP busiest commands between walks PREVIOUS and CURRENT (by pid), ELAPSED seconds apart,
// each FLOOR bytes/s or more. A process seen only in CURRENT started since: all its bytes count;
// a counter that went backwards (a pid reused) counts nothing.
std::vector<CommandIo> busiestCommands(const std::map<uint32_t, ProcessIoReading>& previous,
                                       const std::map<uint32_t, ProcessIoReading>& current,
                                       double elapsed_seconds, size_t top = 3, double floor = 1e6);

// The user as stored in a DeviceUser's cgroup field: "process dd". Cgroup paths start with '/'.
std::string processUserName(const std::string& comm);

}  // namespace stallwatch::collectors
