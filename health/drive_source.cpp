#include "health/drive_source.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "health/ata_smart.h"
#include "health/nvme_reader.h"

namespace stallwatch::health {

std::vector<DriveTarget> driveTargets(const collectors::DeviceTree& tree,
                                      const std::string& dev_dir) {
  std::vector<DriveTarget> out;
  for (const auto& d : tree.devices) {
    if (d.kind != collectors::BlockKind::kDisk) continue;
    DriveTarget t;
    t.device = d.name;
    t.model = d.identity.model;
    t.serial = d.identity.serial;
    t.path = dev_dir + "/" + d.name;
    const std::string& transport = d.identity.transport;
    if (d.name.rfind("nvme", 0) == 0 || transport == "nvme") {
      t.kind = DriveKind::kNvme;
      // The SMART log belongs to the controller: nvme0n1 → /dev/nvme0.
      const size_t n = d.name.find('n', 4);
      t.path = dev_dir + "/" + (n == std::string::npos ? d.name : d.name.substr(0, n));
    } else if (d.name.rfind("sd", 0) == 0 || d.name.rfind("hd", 0) == 0 || transport == "ata" ||
               transport == "sata" || transport == "usb" || transport == "scsi") {
      t.kind = DriveKind::kAta;  // libatasmart finds out (SAT); SAS answers nothing and says so
    } else if (d.name.rfind("vd", 0) == 0 || transport == "virtio") {
      t.no_smart = "virtio disk: no SMART";
    } else if (d.name.rfind("xvd", 0) == 0) {
      t.no_smart = "Xen virtual disk: no SMART";
    } else if (d.name.rfind("rbd", 0) == 0 || d.name.rfind("nbd", 0) == 0) {
      t.no_smart = "network block device: no SMART";
    } else if (d.name.rfind("zram", 0) == 0 || d.name.rfind("ram", 0) == 0) {
      t.no_smart = "memory-backed: no SMART";
    } else if (d.name.rfind("mmcblk", 0) == 0) {
      t.no_smart = "MMC/SD: no SMART";
    } else {
      t.no_smart = "no SMART reader for this device type";
    }
    out.push_back(std::move(t));
  }
  return out;
}

bool NativeDriveReader::read(const DriveTarget& target, DriveReading& reading, std::string& error) {
  reading.device = target.device;
  reading.model = target.model;
  reading.serial = target.serial;
  switch (target.kind) {
    case DriveKind::kNvme:
      return readNvmeDrive(target.path, reading, error);
    case DriveKind::kAta:
      return readAtaDrive(target.path, reading, error);
    default:
      reading.note = target.no_smart;
      return true;
  }
}

struct PendingRead::State {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  TimedRead result;
};

bool PendingRead::done() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

TimedRead PendingRead::result() const {
  std::lock_guard lock(state_->mutex);
  return state_->result;
}

std::shared_ptr<PendingRead> startRead(std::shared_ptr<DriveReader> reader,
                                       const DriveTarget& target) {
  auto pending = std::shared_ptr<PendingRead>(new PendingRead());
  pending->state_ = std::make_shared<PendingRead::State>();
  // The thread holds the state and the reader, never the caller: abandoning it is safe.
  std::thread([state = pending->state_, reader = std::move(reader), target] {
    TimedRead r;
    r.ok = reader->read(target, r.reading, r.error);
    r.finished = true;
    std::lock_guard lock(state->mutex);
    state->result = std::move(r);
    state->done = true;
    state->done_cv.notify_all();
  }).detach();
  return pending;
}

TimedRead waitFor(const std::shared_ptr<PendingRead>& pending, std::chrono::milliseconds timeout) {
  auto& s = *pending->state_;
  std::unique_lock lock(s.mutex);
  if (!s.done_cv.wait_for(lock, timeout, [&] { return s.done; })) return TimedRead{};
  return s.result;
}

bool isPermissionError(const std::string& error) {
  return error.find("Permission denied") != std::string::npos ||
         error.find("Operation not permitted") != std::string::npos;
}

}  // namespace stallwatch::health
