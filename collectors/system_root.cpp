#include "collectors/system_root.h"

#include <system_error>

namespace stallwatch::collectors {

SystemRoot SystemRoot::under(const std::filesystem::path& prefix) {
  SystemRoot root;
  root.proc = prefix / "proc";
  root.sys = prefix / "sys";
  root.dev = prefix / "dev";
  root.pod_logs = prefix / "var" / "log" / "pods";
  root.container_logs = prefix / "var" / "log" / "containers";
  std::error_code ec;
  root.udev_data = std::filesystem::is_directory(prefix / "udev" / "data", ec)
                       ? prefix / "udev" / "data"
                       : prefix / "run" / "udev" / "data";
  return root;
}

bool SystemRoot::isHost() const { return proc == "/proc" && sys == "/sys"; }

}  // namespace stallwatch::collectors
