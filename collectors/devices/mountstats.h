// /proc/self/mountstats: per-mount NFS client statistics (fs/nfs/super.c nfs_show_stats and
// net/sunrpc/stats.c rpc_clnt_show_stats). One block per mount:
//   device 10.0.0.5:/export mounted on /data with fstype nfs4 statvers=1.1
//   	opts:	rw,vers=4.2,...
//   	age:	13968
//   	bytes:	<normal read> <normal write> <direct read> <direct write> <server read> ...
//   	RPC iostats version: 1.1  p/v: 100003/4 (nfs)
//   	xprt:	tcp <port> <bind count> ...
//   	per-op statistics
//   	        READ: <ops> <trans> <timeouts> <bytes sent> <bytes recv> <queue ms> <rtt ms>
//   	              <execute ms> [<errors>]
// Mounts of other filesystems are one "device ... with fstype X" line without statvers=.
// The per-op and transport figures are those of the RPC client, which the kernel shares
// between mounts of one server (same server, transport and options): two mounts of one
// export show the same numbers. statvers 1.0 and 1.1 differ in the transport line only;
// the errors column of a per-op line came with kernel 5.x.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/collector.h"

namespace stallwatch::collectors {

// One RPC operation's cumulative counters (times in milliseconds).
struct NfsOpCounters {
  std::string name;            // READ, WRITE, GETATTR, ...
  uint64_t ops = 0;            // requests completed
  uint64_t transmissions = 0;  // sends, retransmissions included
  uint64_t timeouts = 0;       // major timeouts
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t queue_ms = 0;    // from the request's creation to its transmission
  uint64_t rtt_ms = 0;      // from transmission to the reply
  uint64_t execute_ms = 0;  // from creation to completion: what the caller waited
  std::optional<uint64_t> errors;
};

struct NfsMountStats {
  std::string source;       // server:/export
  std::string mount_point;  // unescaped
  std::string fs_type;      // nfs, nfs4
  std::string statvers;     // 1.0, 1.1
  std::optional<uint64_t> age_seconds;
  std::string transport;  // tcp, udp, rdma
  std::vector<NfsOpCounters> ops;

  const NfsOpCounters* op(std::string_view name) const;
};

struct MountstatsParse {
  std::vector<NfsMountStats> mounts;  // NFS mounts with statistics, in file order
  std::vector<ParseProblem> skipped;  // lines that could not be read
};

// Pure: parses the text of a mountstats file. Malformed lines are skipped and counted; a
// mount whose header is malformed is dropped with its lines.
MountstatsParse parseMountstats(std::string_view text);

}  // namespace stallwatch::collectors
