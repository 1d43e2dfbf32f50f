#include "collectors/devices/device_identity.h"

#include <libudev.h>
#include <sys/sysmacros.h>

#include "collectors/proc_file.h"
#include "collectors/text_scan.h"

namespace stallwatch::collectors {
namespace {

class LibudevSource final : public UdevPropertySource {
 public:
  LibudevSource() : udev_(udev_new()) {}
  ~LibudevSource() override {
    if (udev_) udev_unref(udev_);
  }
  LibudevSource(const LibudevSource&) = delete;
  LibudevSource& operator=(const LibudevSource&) = delete;

  UdevProperties properties(uint32_t major, uint32_t minor) override {
    UdevProperties out;
    if (!udev_) return out;
    udev_device* device = udev_device_new_from_devnum(udev_, 'b', makedev(major, minor));
    if (!device) return out;
    udev_list_entry* entry = udev_device_get_properties_list_entry(device);
    for (; entry; entry = udev_list_entry_get_next(entry)) {
      const char* name = udev_list_entry_get_name(entry);
      const char* value = udev_list_entry_get_value(entry);
      if (name && value) out.emplace(name, value);
    }
    udev_device_unref(device);
    return out;
  }

 private:
  udev* udev_;
};

class UdevDatabaseSource final : public UdevPropertySource {
 public:
  explicit UdevDatabaseSource(std::filesystem::path dir) : dir_(std::move(dir)) {}
  UdevProperties properties(uint32_t major, uint32_t minor) override {
    auto text = readTextFile(dir_ / ("b" + std::to_string(major) + ":" + std::to_string(minor)));
    return text ? parseUdevDatabase(*text) : UdevProperties{};
  }

 private:
  std::filesystem::path dir_;
};

std::string firstOf(const UdevProperties& props, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = props.find(key);
    if (it != props.end() && !it->second.empty()) return it->second;
  }
  return {};
}

std::string attributeOr(const std::filesystem::path& dir,
                        std::initializer_list<const char*> relative_paths) {
  for (const char* rel : relative_paths) {
    if (auto value = readAttribute(dir / rel); value && !value->empty()) {
      // SCSI and NVMe pad model strings with spaces.
      const size_t first = value->find_first_not_of(' ');
      return first == std::string::npos ? std::string{} : value->substr(first);
    }
  }
  return {};
}

std::string transportFromName(const std::string& name) {
  if (name.rfind("nvme", 0) == 0) return "nvme";
  if (name.rfind("vd", 0) == 0) return "virtio";
  if (name.rfind("mmcblk", 0) == 0) return "mmc";
  if (name.rfind("xvd", 0) == 0) return "xen";
  return {};
}

}  // namespace

std::unique_ptr<UdevPropertySource> makeLibudevSource() {
  return std::make_unique<LibudevSource>();
}

std::unique_ptr<UdevPropertySource> makeUdevDatabaseSource(const SystemRoot& root) {
  return std::make_unique<UdevDatabaseSource>(root.udev_data);
}

std::unique_ptr<UdevPropertySource> makeUdevSourceFor(const SystemRoot& root) {
  if (root.isHost()) return makeLibudevSource();
  return makeUdevDatabaseSource(root);
}

UdevProperties parseUdevDatabase(std::string_view text) {
  UdevProperties props;
  forEachLine(text, [&](std::string_view line, size_t) {
    if (line.size() < 3 || line.substr(0, 2) != "E:") return;
    const std::string_view kv = line.substr(2);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) return;
    props.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  });
  return props;
}

DeviceIdentity identify(const UdevProperties& props, const std::filesystem::path& sys_block_dir,
                        const std::string& name) {
  DeviceIdentity id;
  id.model = firstOf(props, {"ID_MODEL", "ID_NVME_MODEL"});
  if (id.model.empty()) id.model = attributeOr(sys_block_dir, {"device/model"});
  id.serial = firstOf(props, {"ID_SERIAL_SHORT", "ID_SCSI_SERIAL", "ID_SERIAL"});
  if (id.serial.empty()) id.serial = attributeOr(sys_block_dir, {"device/serial", "serial"});
  id.wwn = firstOf(props, {"ID_WWN_WITH_EXTENSION", "ID_WWN"});
  if (id.wwn.empty()) id.wwn = attributeOr(sys_block_dir, {"wwid", "device/wwid"});
  id.transport = firstOf(props, {"ID_BUS"});
  if (id.transport.empty()) id.transport = transportFromName(name);
  if (auto rotational = readAttribute(sys_block_dir / "queue" / "rotational")) {
    if (*rotational == "0" || *rotational == "1") id.rotational = (*rotational == "1");
  }
  if (auto rpm = parseUnsigned(firstOf(props, {"ID_ATA_ROTATION_RATE_RPM"}))) {
    id.rotation_rate_rpm = *rpm;
  }
  if (auto size = readAttribute(sys_block_dir / "size")) {
    // sysfs "size" counts 512-byte sectors whatever the logical block size.
    if (auto sectors = parseUnsigned(*size)) id.size_bytes = *sectors * 512;
  }
  return id;
}

}  // namespace stallwatch::collectors
