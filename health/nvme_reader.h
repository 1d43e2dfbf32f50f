// NVMe health through libnvme (Debian's libnvme-dev): Get Log Page 02h from the controller.
#pragma once

#include <string>

#include "health/drive_reading.h"

namespace stallwatch::health {

// Reads the controller's SMART / Health log (CTRL_PATH: /dev/nvme0). False with ERROR (EACCES:
// root or CAP_SYS_ADMIN is needed for the admin command).
bool readNvmeDrive(const std::string& ctrl_path, DriveReading& reading, std::string& error);

}  // namespace stallwatch::health
