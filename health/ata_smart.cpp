#include "health/ata_smart.h"

#include <atasmart.h>
#include <stddef.h>  // atasmart.h uses size_t without including it

#include <cerrno>
#include <cstring>
#include <memory>

namespace stallwatch::health {
namespace {

// libatasmart's blob tags (atasmart.c): big-endian tag, big-endian length, then the section.
constexpr uint32_t kTagIdentify = 0x49444659;     // 'IDFY'
constexpr uint32_t kTagSmartStatus = 0x534D5354;  // 'SMST'
constexpr uint32_t kTagSmartData = 0x534D4454;    // 'SMDT'
constexpr uint32_t kTagThresholds = 0x534D5448;   // 'SMTH'

void putBigEndian32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

void section(std::vector<uint8_t>& out, uint32_t tag, const uint8_t* data, size_t size) {
  putBigEndian32(out, tag);
  putBigEndian32(out, static_cast<uint32_t>(size));
  out.insert(out.end(), data, data + size);
}

using DiskPtr = std::unique_ptr<SkDisk, decltype(&sk_disk_free)>;

void collectAttribute(SkDisk*, const SkSmartAttributeParsedData* a, void* user) {
  auto* reading = static_cast<DriveReading*>(user);
  AtaAttribute attr;
  attr.id = a->id;
  attr.name = a->name ? a->name : "";
  attr.value = a->current_value;
  attr.worst = a->worst_value;
  attr.threshold = a->threshold_valid ? a->threshold : 0;
  for (int i = 5; i >= 0; --i) attr.raw = (attr.raw << 8) | a->raw[i];
  attr.prefailure = a->prefailure;
  reading->ata.push_back(std::move(attr));
}

bool parseLoaded(SkDisk* d, DriveReading& reading, std::string& error) {
  reading.ata.clear();
  if (sk_disk_smart_parse_attributes(d, collectAttribute, &reading) < 0) {
    error = std::string("libatasmart could not parse the SMART data: ") + std::strerror(errno);
    return false;
  }
  reading.kind = DriveKind::kAta;
  reading.smart_available = true;
  SkBool good = 0;
  if (sk_disk_smart_status(d, &good) == 0) reading.passed = good != 0;
  uint64_t mkelvin = 0;
  if (sk_disk_smart_get_temperature(d, &mkelvin) == 0) {
    reading.temperature_c = static_cast<double>(mkelvin) / 1000.0 - 273.15;
  }
  uint64_t ms = 0;
  if (sk_disk_smart_get_power_on(d, &ms) == 0) reading.power_on_hours = ms / 3'600'000;
  return true;
}

}  // namespace

bool parseAtaSmartBlob(std::span<const uint8_t> blob, DriveReading& reading, std::string& error) {
  SkDisk* raw = nullptr;
  if (sk_disk_open(nullptr, &raw) < 0) {
    error = "libatasmart: cannot create a blob disk";
    return false;
  }
  DiskPtr d(raw, sk_disk_free);
  if (sk_disk_set_blob(d.get(), blob.data(), blob.size()) < 0) {
    error = "libatasmart rejected the SMART data (malformed blob)";
    return false;
  }
  return parseLoaded(d.get(), reading, error);
}

std::vector<uint8_t> buildAtaSmartBlob(const std::vector<AtaAttribute>& attributes,
                                       std::optional<bool> passed) {
  uint8_t identify[512] = {};
  identify[82 * 2] = 0x01;  // word 82 bit 0: SMART feature set supported
  identify[85 * 2] = 0x01;  // word 85 bit 0: enabled
  uint8_t data[512] = {};
  uint8_t thresholds[512] = {};
  data[0] = 0x10;  // data structure revision
  thresholds[0] = 0x10;
  size_t slot = 0;
  for (const auto& a : attributes) {
    if (slot == 30) break;  // the table holds 30 attributes
    uint8_t* e = data + 2 + 12 * slot;
    e[0] = a.id;
    const uint16_t flags = a.prefailure ? 0x0001 : 0x0000;
    e[1] = static_cast<uint8_t>(flags);
    e[2] = static_cast<uint8_t>(flags >> 8);
    e[3] = a.value;
    e[4] = a.worst;
    for (int i = 0; i < 6; ++i) e[5 + i] = static_cast<uint8_t>(a.raw >> (8 * i));
    uint8_t* t = thresholds + 2 + 12 * slot;
    t[0] = a.id;
    t[1] = a.threshold;
    ++slot;
  }
  // Byte 511: the two's complement of the sum of bytes 0..510.
  for (uint8_t* block : {data, thresholds}) {
    uint8_t sum = 0;
    for (int i = 0; i < 511; ++i) sum = static_cast<uint8_t>(sum + block[i]);
    block[511] = static_cast<uint8_t>(0x100 - sum);
  }
  std::vector<uint8_t> blob;
  section(blob, kTagIdentify, identify, sizeof identify);
  if (passed) {
    const uint8_t status[4] = {0, 0, 0, static_cast<uint8_t>(*passed ? 1 : 0)};
    section(blob, kTagSmartStatus, status, sizeof status);
  }
  section(blob, kTagSmartData, data, sizeof data);
  section(blob, kTagThresholds, thresholds, sizeof thresholds);
  return blob;
}

bool readAtaDrive(const std::string& dev_path, DriveReading& reading, std::string& error) {
  SkDisk* raw = nullptr;
  if (sk_disk_open(dev_path.c_str(), &raw) < 0) {
    error = "cannot open " + dev_path + ": " + std::strerror(errno);
    return false;
  }
  DiskPtr d(raw, sk_disk_free);
  SkBool available = 0;
  if (sk_disk_smart_is_available(d.get(), &available) < 0 || !available) {
    reading.kind = DriveKind::kAta;
    reading.note = "SMART not available on this drive";
    return true;
  }
  SkBool awake = 1;
  if (sk_disk_check_sleep_mode(d.get(), &awake) == 0 && !awake) {
    reading.kind = DriveKind::kAta;
    reading.note = "in standby; not woken to read SMART";
    return true;
  }
  if (sk_disk_smart_read_data(d.get()) < 0) {
    error = "SMART READ DATA failed on " + dev_path + ": " + std::strerror(errno);
    return false;
  }
  const void* blob = nullptr;
  size_t size = 0;
  if (sk_disk_get_blob(d.get(), &blob, &size) < 0) {
    error = "libatasmart kept no SMART data for " + dev_path;
    return false;
  }
  reading.source = "libatasmart";
  return parseAtaSmartBlob({static_cast<const uint8_t*>(blob), size}, reading, error);
}

}  // namespace stallwatch::health
