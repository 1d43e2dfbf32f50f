#include "collectors/devices/mountstats.h"

#include "collectors/devices/mountinfo.h"
#include "collectors/text_scan.h"
#include "common/text.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kMaxMountstatsFields = 16;

bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "device SOURCE mounted on POINT with fstype TYPE [statvers=V]": fills M, or says why not.
std::optional<std::string> parseHeader(std::string_view line, NfsMountStats& m, bool& has_stats) {
  std::string_view f[kMaxMountstatsFields];
  const size_t count = splitFields(line, f);
  if (count < 8 || count > 9 || f[0] != "device" || f[2] != "mounted" || f[3] != "on" ||
      f[5] != "with" || f[6] != "fstype") {
    return "expected 'device SOURCE mounted on PATH with fstype TYPE [statvers=V]'";
  }
  m.source = mountText(f[1]);
  m.mount_point = mountText(f[4]);
  m.fs_type = common::boundedUtf8(f[7], 64);
  has_stats = count == 9;
  if (has_stats) {
    if (!startsWith(f[8], "statvers="))
      return "expected statvers=, found '" + std::string(f[8]) + "'";
    m.statvers = std::string(f[8].substr(9));
  }
  return std::nullopt;
}

// "NAME: ops trans timeouts sent recv queue rtt execute [errors]"
std::optional<std::string> parseOp(std::string_view line, NfsMountStats& m) {
  std::string_view f[kMaxMountstatsFields];
  const size_t count = splitFields(line, f);
  if (count < 9 || count > 10 || f[0].size() < 2 || f[0].back() != ':') {
    return "expected 'OP: ' and 8 or 9 counters";
  }
  NfsOpCounters op;
  op.name = std::string(f[0].substr(0, f[0].size() - 1));
  uint64_t* fields[] = {&op.ops,        &op.transmissions,  &op.timeouts,
                        &op.bytes_sent, &op.bytes_received, &op.queue_ms,
                        &op.rtt_ms,     &op.execute_ms};
  for (size_t i = 0; i < 8; ++i) {
    auto v = parseUnsigned(f[i + 1]);
    if (!v) return "counter " + std::to_string(i + 1) + " of " + op.name + " is not a number";
    *fields[i] = *v;
  }
  if (count == 10) {
    auto v = parseUnsigned(f[9]);
    if (!v) return "the errors counter of " + op.name + " is not a number";
    op.errors = *v;
  }
  m.ops.push_back(std::move(op));
  return std::nullopt;
}

}  // namespace

const NfsOpCounters* NfsMountStats::op(std::string_view name) const {
  for (const auto& o : ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

MountstatsParse parseMountstats(std::string_view text) {
  MountstatsParse result;
  // The mount whose lines are being read; none after a header without statistics or a bad one.
  std::optional<NfsMountStats> current;
  bool in_ops = false;
  auto finish = [&] {
    if (current) result.mounts.push_back(std::move(*current));
    current.reset();
    in_ops = false;
  };
  forEachLine(text, [&](std::string_view line, size_t number) {
    auto skip = [&](std::string why) { result.skipped.push_back({number, std::move(why)}); };
    std::string_view f[kMaxMountstatsFields];
    const size_t count = splitFields(line, f);
    if (count == 0) return;  // the blank line that ends a block
    if (f[0] == "device") {
      finish();
      NfsMountStats m;
      bool has_stats = false;
      if (auto why = parseHeader(line, m, has_stats)) return skip(*why);
      if (has_stats && (m.fs_type == "nfs" || m.fs_type == "nfs4")) current = std::move(m);
      return;
    }
    if (!current) return;  // a block of a mount that is not read (other filesystems)
    if (in_ops) {
      if (auto why = parseOp(line, *current)) skip(*why);
      return;
    }
    if (f[0] == "per-op" && count == 2 && f[1] == "statistics") {
      in_ops = true;
    } else if (f[0] == "age:") {
      auto age = count == 2 ? parseUnsigned(f[1]) : std::nullopt;
      if (!age) return skip("expected 'age: SECONDS'");
      current->age_seconds = *age;
    } else if (f[0] == "xprt:") {
      if (count < 2 || (f[1] != "tcp" && f[1] != "udp" && f[1] != "rdma" && f[1] != "local")) {
        return skip("expected 'xprt: tcp|udp|rdma|local ...'");
      }
      current->transport = std::string(f[1]);
    }
    // opts, caps, nfsv4, sec, events, bytes, RPC iostats version: not used.
  });
  finish();
  return result;
}

}  // namespace stallwatch::collectors
