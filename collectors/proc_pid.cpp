#include "collectors/proc_pid.h"

#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

constexpr size_t kStatFieldsAfterComm = 20;  // state (3) .. starttime (22)

void explain(std::string* why, std::string text) {
  if (why) *why = std::move(text);
}

}  // namespace

std::optional<ProcStat> parseProcStat(std::string_view text, std::string* why) {
  // "pid (comm) state ppid ...": comm is whatever the process named itself, so the end of
  // it is the LAST ')' in the line.
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    explain(why, "no '(comm)' field");
    return std::nullopt;
  }
  std::string_view head = text.substr(0, open);
  while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
  const auto pid = parseUnsigned(head);
  if (!pid || *pid > UINT32_MAX) {
    explain(why, "pid is not an integer");
    return std::nullopt;
  }
  std::string_view rest = text.substr(close + 1);
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  std::string_view f[kStatFieldsAfterComm];
  // There are ~50 fields after comm; splitFields stops counting past the ones we need.
  const size_t count = splitFields(rest, f);
  if (count < kStatFieldsAfterComm) {
    explain(why, "expected at least 22 fields, found " + std::to_string(count + 2));
    return std::nullopt;
  }
  if (f[0].size() != 1) {
    explain(why, "state '" + std::string(f[0]) + "' is not one letter");
    return std::nullopt;
  }
  // Field numbers as in proc.rst table 1-4 (1-based, pid = 1, comm = 2, state = 3).
  const auto ppid = parseUnsigned(f[1]);         // 4
  const auto session = parseUnsigned(f[3]);      // 6
  const auto utime = parseUnsigned(f[11]);       // 14
  const auto stime = parseUnsigned(f[12]);       // 15
  const auto threads = parseUnsigned(f[17]);     // 20
  const auto start_time = parseUnsigned(f[19]);  // 22
  if (!ppid || !utime || !stime || !threads || !start_time || *ppid > UINT32_MAX ||
      *threads > UINT32_MAX) {
    explain(why, "a numeric field (ppid, utime, stime, num_threads, starttime) is malformed");
    return std::nullopt;
  }
  ProcStat s;
  s.pid = static_cast<uint32_t>(*pid);
  s.comm = std::string(text.substr(open + 1, close - open - 1));
  s.state = f[0][0];
  s.ppid = static_cast<uint32_t>(*ppid);
  if (session && *session <= UINT32_MAX) s.session = static_cast<uint32_t>(*session);
  s.utime_ticks = *utime;
  s.stime_ticks = *stime;
  s.num_threads = static_cast<uint32_t>(*threads);
  s.start_time_ticks = *start_time;
  return s;
}

std::optional<ProcIo> parseProcIo(std::string_view text, std::string* why) {
  ProcIo io;
  struct Field {
    std::string_view key;
    uint64_t* value;
    bool seen;
  } fields[] = {{"rchar", &io.rchar, false},
                {"wchar", &io.wchar, false},
                {"syscr", &io.syscr, false},
                {"syscw", &io.syscw, false},
                {"read_bytes", &io.read_bytes, false},
                {"write_bytes", &io.write_bytes, false},
                {"cancelled_write_bytes", &io.cancelled_write_bytes, false}};
  bool bad = false;
  forEachLine(text, [&](std::string_view line, size_t line_number) {
    if (bad || line.empty()) return;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      explain(why, "line " + std::to_string(line_number) + " has no ':'");
      bad = true;
      return;
    }
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    for (Field& f : fields) {
      if (f.key != key) continue;
      const auto parsed = parseUnsigned(value);
      if (!parsed) {
        explain(why, "line " + std::to_string(line_number) + ": '" + std::string(value) +
                         "' is not an unsigned integer");
        bad = true;
        return;
      }
      *f.value = *parsed;
      f.seen = true;
    }
  });
  if (bad) return std::nullopt;
  for (const Field& f : fields) {
    if (!f.seen) {
      explain(why, "no '" + std::string(f.key) + "' line");
      return std::nullopt;
    }
  }
  return io;
}

std::vector<std::string> splitNul(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t end = text.find('\0');
    out.emplace_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

std::map<std::string, std::string> parseEnviron(std::string_view text) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : splitNul(text)) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<uint32_t> parsePidList(std::string_view text) {
  std::vector<uint32_t> pids;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\n' && text[i] != '\t') ++i;
    if (i == start) break;
    if (auto v = parseUnsigned(text.substr(start, i - start)); v && *v > 0 && *v <= UINT32_MAX) {
      pids.push_back(static_cast<uint32_t>(*v));
    }
  }
  return pids;
}

}  // namespace stallwatch::collectors
