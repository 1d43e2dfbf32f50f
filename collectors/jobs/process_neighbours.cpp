#include "collectors/jobs/process_neighbours.h"

#include <algorithm>

#include "collectors/counter_rates.h"

namespace stallwatch::collectors {

std::vector<CommandIo> busiestCommands(const std::map<uint32_t, ProcessIoReading>& previous,
                                       const std::map<uint32_t, ProcessIoReading>& current,
                                       double elapsed_seconds, size_t top, double floor) {
  if (!(elapsed_seconds > 0)) return {};
  struct Bytes {
    uint64_t read = 0, write = 0;
  };
  std::map<std::string, std::vector<std::pair<uint64_t, uint32_t>>> pids;  // comm: (bytes, pid)
  std::map<std::string, Bytes> by_comm;
  for (const auto& [pid, now] : current) {
    Bytes moved{now.read_bytes, now.write_bytes};
    if (auto before = previous.find(pid); before != previous.end()) {
      if (before->second.comm != now.comm) continue;  // another process under a reused pid
      moved = {forwardDelta(before->second.read_bytes, now.read_bytes),
               forwardDelta(before->second.write_bytes, now.write_bytes)};
    }
    if (moved.read + moved.write == 0) continue;
    by_comm[now.comm].read += moved.read;
    by_comm[now.comm].write += moved.write;
    pids[now.comm].emplace_back(moved.read + moved.write, pid);
  }
  std::vector<CommandIo> out;
  for (auto& [comm, bytes] : by_comm) {
    CommandIo c;
    c.comm = comm;
    c.read_bytes_per_second = static_cast<double>(bytes.read) / elapsed_seconds;
    c.write_bytes_per_second = static_cast<double>(bytes.write) / elapsed_seconds;
    if (c.bytes_per_second() < floor) continue;
    auto& list = pids[comm];
    std::sort(list.rbegin(), list.rend());
    for (const auto& entry : list) c.pids.push_back(entry.second);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const CommandIo& a, const CommandIo& b) {
    return a.bytes_per_second() > b.bytes_per_second();
  });
  if (out.size() > top) out.resize(top);
  return out;
}

std::string processUserName(const std::string& comm) { return "process " + comm; }

}  // namespace stallwatch::collectors
