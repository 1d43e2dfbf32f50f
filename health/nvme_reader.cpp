#include "health/nvme_reader.h"

#include <fcntl.h>
#include <libnvme.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "health/nvme_smart_log.h"

namespace stallwatch::health {

static_assert(sizeof(nvme_smart_log) == sizeof(NvmeSmartLogPage),
              "libnvme and the spec agree on the page size");
static_assert(offsetof(nvme_smart_log, media_errors) == offsetof(NvmeSmartLogPage, media_errors));
static_assert(offsetof(nvme_smart_log, temp_sensor) ==
              offsetof(NvmeSmartLogPage, temperature_sensors));

bool readNvmeDrive(const std::string& ctrl_path, DriveReading& reading, std::string& error) {
  const int fd = ::open(ctrl_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + ctrl_path + ": " + std::strerror(errno);
    return false;
  }
  nvme_smart_log log{};
  const int rc = nvme_get_log_smart(fd, NVME_NSID_ALL, false, &log);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) {
    error = "Get Log Page (SMART) failed on " + ctrl_path + ": " +
            (rc < 0 ? std::strerror(saved) : "NVMe status " + std::to_string(rc));
    return false;
  }
  const auto* bytes = reinterpret_cast<const uint8_t*>(&log);
  auto health = parseNvmeSmartLog({bytes, sizeof log});
  if (!health) {
    error = "short SMART log from " + ctrl_path;
    return false;
  }
  reading.kind = DriveKind::kNvme;
  reading.source = "nvme-log";
  reading.smart_available = true;
  reading.nvme = *health;
  reading.temperature_c = health->temperature_c;
  reading.power_on_hours = static_cast<uint64_t>(health->power_on_hours);
  // The controller's own overall judgement is its critical warning byte.
  reading.passed = health->critical_warning == 0;
  return true;
}

}  // namespace stallwatch::health
