// Who a block device is: model, serial, WWN, transport, rotation. udev knows this best (its
// ata_id/scsi_id/nvme probes fill ID_* properties); sysfs attributes are the fallback where
// udevd does not run (containers, early boot).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "collectors/system_root.h"

namespace stallwatch::collectors {

using UdevProperties = std::map<std::string, std::string>;

// Where udev properties come from: libudev on the live host, the udev database files of a
// fixture tree in tests. Narrow on purpose so that tests need no udevd.
class UdevPropertySource {
 public:
  virtual ~UdevPropertySource() = default;
  // Properties of block device MAJOR:MINOR; empty if udev has no record of it.
  virtual UdevProperties properties(uint32_t major, uint32_t minor) = 0;
};

// libudev (udev_device_new_from_devnum). Works on the live host only.
std::unique_ptr<UdevPropertySource> makeLibudevSource();
// Reads ROOT's udev database, b<major>:<minor> files with E:KEY=VALUE lines.
std::unique_ptr<UdevPropertySource> makeUdevDatabaseSource(const SystemRoot& root);
// libudev for the host root, the database reader for anything else.
std::unique_ptr<UdevPropertySource> makeUdevSourceFor(const SystemRoot& root);

// Pure: parses one udev database file's text into its E: properties.
UdevProperties parseUdevDatabase(std::string_view text);

struct DeviceIdentity {
  std::string model;
  std::string serial;
  std::string wwn;
  std::string transport;  // ata, scsi, nvme, usb, virtio, ...
  std::optional<bool> rotational;
  std::optional<uint64_t> rotation_rate_rpm;
  std::optional<uint64_t> size_bytes;
};

// Combines udev properties with the sysfs attributes in SYS_BLOCK_DIR (/sys/block/<disk>).
DeviceIdentity identify(const UdevProperties& props, const std::filesystem::path& sys_block_dir,
                        const std::string& name);

}  // namespace stallwatch::collectors
