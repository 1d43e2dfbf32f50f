// The optional smartctl collector (`record --collector.smartctl[=PATH]`, off by default):
// for drives the native readers cannot reach (SAS/SCSI, some USB bridges), runs
// `smartctl --json -x DEVICE` directly (no shell, fixed environment), reads its JSON, and
// kills it if it has not finished within the timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "health/drive_source.h"

namespace stallwatch::health {

struct ProgramOutput {
  bool started = false;
  bool timed_out = false;
  int exit_status = -1;  // -1: killed by a signal
  std::string out;       // standard output, at most 4 MiB
  std::string error;     // why it did not start
};

// Runs ARGV[0] (looked up in a fixed PATH) with ARGV, stdin from /dev/null, stderr
// discarded; kills its process group after TIMEOUT.
ProgramOutput runProgram(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// Native first; where that fails for a reason other than permission, smartctl.
class SmartctlFallbackReader : public DriveReader {
 public:
  SmartctlFallbackReader(std::shared_ptr<DriveReader> native, std::string smartctl,
                         std::chrono::milliseconds timeout);
  bool read(const DriveTarget& target, DriveReading& reading, std::string& error) override;

 private:
  std::shared_ptr<DriveReader> native_;
  std::string smartctl_;
  std::chrono::milliseconds timeout_;
};

}  // namespace stallwatch::health
