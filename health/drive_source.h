// Which drives to ask about their health, how, and asking with a time limit. A query to a
// failing drive can hang in the kernel for minutes; it runs on a thread of its own and is
// abandoned at the timeout (the thread finishes, or not, on its own), so that nothing that
// samples or writes ever waits on a drive.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectors/devices/block_devices.h"
#include "health/drive_reading.h"

namespace stallwatch::health {

struct DriveTarget {
  std::string device;  // sda, nvme0n1
  DriveKind kind = DriveKind::kUnknown;
  std::string path;  // what to open: /dev/sda, or the NVMe controller /dev/nvme0
  std::string model;
  std::string serial;
  std::string no_smart;  // non-empty: why this device has no SMART (virtio, loop, ...)
};

// The whole physical disks of TREE (partitions, dm, md and loop devices are layers over
// them), each with how to read it, or why it cannot be read. DEV_DIR: where device nodes are.
std::vector<DriveTarget> driveTargets(const collectors::DeviceTree& tree,
                                      const std::string& dev_dir = "/dev");

// Reads one drive; may block for as long as the drive does. Behind an interface so that
// the health thread can be tested with drives that hang.
class DriveReader {
 public:
  virtual ~DriveReader() = default;
  // False with ERROR when the drive could not be read.
  virtual bool read(const DriveTarget& target, DriveReading& reading, std::string& error) = 0;
};

// libatasmart for ATA (and SATA behind SAS HBAs that translate), libnvme for NVMe.
class NativeDriveReader : public DriveReader {
 public:
  bool read(const DriveTarget& target, DriveReading& reading, std::string& error) override;
};

struct TimedRead {
  bool finished = false;  // false: still running at the timeout, abandoned
  bool ok = false;
  DriveReading reading;
  std::string error;
};

// A handle on a read that may outlive its caller's patience.
class PendingRead {
 public:
  bool done() const;
  TimedRead result() const;

 private:
  friend std::shared_ptr<PendingRead> startRead(std::shared_ptr<DriveReader>, const DriveTarget&);
  friend TimedRead waitFor(const std::shared_ptr<PendingRead>&, std::chrono::milliseconds);
  struct State;
  std::shared_ptr<State> state_;
};

// Starts READER on TARGET on a detached thread.
std::shared_ptr<PendingRead> startRead(std::shared_ptr<DriveReader> reader,
                                       const DriveTarget& target);
// Waits up to TIMEOUT; finished=false if the read is still going.
TimedRead waitFor(const std::shared_ptr<PendingRead>& pending, std::chrono::milliseconds timeout);

// What a reading means for privileges: errno text EACCES/EPERM.
bool isPermissionError(const std::string& error);

}  // namespace stallwatch::health
