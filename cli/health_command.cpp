// `stallwatch health`: each drive's verdict and the counters behind it, read now from this
// host's drives, from what the agent recorded (--db), or from smartctl JSON dumps.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/json_output.h"
#include "collectors/devices/block_devices.h"
#include "health/drive_source.h"
#include "health/reading_json.h"
#include "health/smartctl_json.h"
#include "health/verdict.h"
#include "storage/recording.h"
#include "storage/store.h"

namespace stallwatch::cli {
namespace {

namespace fs = std::filesystem;

struct HealthArgs {
  std::string db;
  bool json = false;
  std::vector<std::string> smartctl_json;
  std::string timeout = "10s";
};

struct Row {
  std::string label;  // device, or the file it came from
  health::DriveReading reading;
  health::HealthVerdict verdict;
  std::optional<int64_t> ts_ms;
};

// smartctl's JSON of one drive is a few tens of KB; anything past this is not one.
constexpr off_t kMaxSmartctlJsonBytes = 16 << 20;

// A regular file of bounded size only: a FIFO would hang the command (no --timeout applies
// to reading input), /dev/zero would be read until memory runs out.
std::string slurp(const fs::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("cannot read: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(
        "not a regular file (a FIFO, device or socket is not smartctl output)");
  }
  if (st.st_size > kMaxSmartctlJsonBytes) {
    ::close(fd);
    throw std::runtime_error(fmt::format("{} bytes: larger than any smartctl output ({} at most)",
                                         st.st_size, kMaxSmartctlJsonBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

// Like smartctl's own exit status, a bit mask that scripts can test: 1 an input could not
// be read or parsed, 8 a drive failing or worn out, 32 a drive with a warning.
constexpr int kExitBadInput = 1;
constexpr int kExitFailing = 8;
constexpr int kExitWarning = 32;

int verdictBits(const std::vector<Row>& rows) {
  int bits = 0;
  for (const auto& r : rows) {
    const auto v = r.verdict.verdict;
    if (v == health::Verdict::kFailing || v == health::Verdict::kWornOut) bits |= kExitFailing;
    if (v == health::Verdict::kWarning) bits |= kExitWarning;
  }
  return bits;
}

void print(const std::vector<Row>& rows, bool as_json) {
  if (as_json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json j = health::toJson(r.verdict);
      j["device"] = r.label;
      j["reading"] = health::toJson(r.reading);
      if (!r.reading.note.empty()) j["note"] = r.reading.note;
      if (r.ts_ms) j["ts_ms"] = *r.ts_ms;
      out.push_back(std::move(j));
    }
    printJson("health", {{"drives", std::move(out)}});
    return;
  }
  std::cout << fmt::format("{:<24} {:<7} {:<28} {:<12} {:>6} {:>10}\n", "DEVICE", "KIND", "MODEL",
                           "VERDICT", "TEMP", "POWER-ON");
  for (const auto& r : rows) {
    const auto& d = r.reading;
    std::cout << fmt::format("{:<24} {:<7} {:<28} {:<12} {:>6} {:>10}\n", r.label,
                             health::toString(d.kind), d.model.substr(0, 28),
                             health::toString(r.verdict.verdict),
                             d.temperature_c ? fmt::format("{:.0f}°C", *d.temperature_c) : "-",
                             d.power_on_hours ? fmt::format("{} h", *d.power_on_hours) : "-");
    for (const auto& e : r.verdict.evidence) {
      if (e.counter == "note") continue;
      std::cout << "    * " << e.counter << ": " << e.value
                << (e.previous.empty() ? "" : " (was " + e.previous + ")") << "  -> "
                << health::toString(e.implies) << ": " << e.rule << "\n";
    }
    if (!d.note.empty()) std::cout << "    " << d.note << "\n";
  }
}

int fromSmartctl(const HealthArgs& args) {
  std::vector<fs::path> files;
  int rc = 0;
  // Each entry on its own: one link loop or unreadable file is said and skipped, the rest read.
  for (const auto& p : args.smartctl_json) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> in_dir;
      for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code entry_ec;
        const bool regular = it->is_regular_file(entry_ec);
        if (entry_ec) {
          std::cerr << "stallwatch health: " << it->path().string()
                    << ": skipped: " << entry_ec.message() << "\n";
          rc |= kExitBadInput;
        } else if (regular && it->path().extension() == ".json") {
          in_dir.push_back(it->path());
        }
      }
      if (ec) {
        std::cerr << "stallwatch health: " << p << ": " << ec.message() << "\n";
        rc |= kExitBadInput;
      }
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.emplace_back(p);
    }
  }
  std::vector<Row> rows;
  for (const auto& f : files) {
    Row row;
    row.label = f.filename().string();
    try {
      const auto parsed = health::parseSmartctlJson(slurp(f));
      row.reading = parsed.reading;
      if (parsed.kind == health::SmartctlOutput::kScan) {
        std::string names;
        for (const auto& n : parsed.scanned) names += (names.empty() ? "" : " ") + n;
        row.reading.note = fmt::format("a device list (smartctl --scan), {} devices: {}",
                                       parsed.scanned.size(), names);
      }
    } catch (const std::exception& e) {
      std::cerr << "stallwatch health: " << f.string() << ": " << e.what() << "\n";
      rc |= kExitBadInput;
      continue;
    }
    row.verdict = health::judge(row.reading);
    rows.push_back(std::move(row));
  }
  print(rows, args.json);
  return rc | verdictBits(rows);
}

int fromDatabase(const HealthArgs& args) {
  // The newest reading of each drive, judged against the one before it.
  const auto readings = storage::Recording::open(args.db, storage::Recording::Needs::kDriveHealth)
                            .latestDriveReadings();
  std::vector<Row> rows;
  for (auto& [device, list] : readings) {
    Row row;
    row.label = device;
    row.ts_ms = list.back().ts_ms;
    row.reading = list.back().reading;
    const health::DriveReading* previous =
        list.size() > 1 ? &list[list.size() - 2].reading : nullptr;
    row.verdict = health::judge(row.reading, previous);
    rows.push_back(std::move(row));
  }
  if (rows.empty() && !args.json) {
    std::cout << "no drive health readings in " << args.db << "\n";
    return 0;
  }
  print(rows, args.json);
  return verdictBits(rows);
}

int fromHost(const HealthArgs& args) {
  const auto timeout = parseDuration(args.timeout);
  if (!timeout || timeout->count() <= 0) {
    std::cerr << "stallwatch health: --timeout '" << args.timeout
              << "' is not a duration (examples: 5s, 30s)\n";
    return 2;
  }
  collectors::SystemRoot root;
  auto udev = collectors::makeUdevSourceFor(root);
  const auto tree = collectors::scanBlockDevices(root, *udev);
  const auto targets = health::driveTargets(tree);
  auto reader = std::make_shared<health::NativeDriveReader>();
  std::vector<Row> rows;
  size_t capable = 0;
  for (const auto& t : targets) {
    Row row;
    row.label = t.device;
    row.reading.device = t.device;
    row.reading.model = t.model;
    if (!t.no_smart.empty()) {
      row.reading.note = t.no_smart;
    } else {
      ++capable;
      const auto result =
          health::waitFor(health::startRead(reader, t),
                          std::chrono::duration_cast<std::chrono::milliseconds>(*timeout));
      row.reading.kind = t.kind;
      if (!result.finished) {
        row.reading.note = "no answer within " + args.timeout + " (the drive may be hung)";
      } else if (!result.ok) {
        row.reading.note = result.error;
        if (health::isPermissionError(result.error)) {
          row.reading.note +=
              " (reading SMART needs root, or CAP_SYS_RAWIO for ATA and CAP_SYS_ADMIN for NVMe)";
        }
      } else {
        row.reading = result.reading;
      }
    }
    row.verdict = health::judge(row.reading);
    rows.push_back(std::move(row));
  }
  if (capable == 0 && !args.json) {
    std::cout << "no SMART-capable drives on this host";
    if (!rows.empty()) {
      std::cout << ":";
      for (const auto& r : rows) std::cout << "\n  " << r.label << ": " << r.reading.note;
    }
    std::cout << "\n";
    return 0;
  }
  print(rows, args.json);
  return verdictBits(rows);
}

int runHealth(const HealthArgs& args) {
  try {
    if (!args.smartctl_json.empty()) return fromSmartctl(args);
    if (!args.db.empty()) return fromDatabase(args);
    return fromHost(args);
  } catch (const std::exception& e) {
    std::cerr << "stallwatch health: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

CommandRunner addHealthCommand(CLI::App& app) {
  auto args = std::make_shared<HealthArgs>();
  CLI::App* cmd = app.add_subcommand(
      "health",
      "Each drive's health verdict (ok, warning, failing, worn-out) and the counters behind it. "
      "Exit status, a bit mask like smartctl's: 1 an input could not be read, 8 a drive failing or "
      "worn out, 32 a drive with a warning");
  cmd->add_option("--db", args->db,
                  "Show what `stallwatch record` recorded in this database instead of reading now")
      ->check(CLI::ExistingFile);
  cmd->add_option("--smartctl-json", args->smartctl_json,
                  "Judge smartctl --json output files (or directories of them) instead of this "
                  "host's drives")
      ->check(CLI::ExistingPath);
  cmd->add_flag("--json", args->json, "JSON output");
  cmd->add_option("--timeout", args->timeout,
                  "Give up on a drive that has not answered after this long")
      ->capture_default_str();
  return [args] { return runHealth(*args); };
}

}  // namespace stallwatch::cli
