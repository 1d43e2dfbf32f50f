// Where the collectors find the kernel's and udev's files. Every path into /proc, /sys, /dev
// or the udev database is built from one of these, so tests and replays run on fixture trees.
#pragma once

#include <filesystem>

namespace stallwatch::collectors {

struct SystemRoot {
  std::filesystem::path proc{"/proc"};
  std::filesystem::path sys{"/sys"};
  std::filesystem::path dev{"/dev"};
  std::filesystem::path udev_data{"/run/udev/data"};
  // The kubelet's pod log directories (NAMESPACE_NAME_UID): a pod's name from its UID.
  std::filesystem::path pod_logs{"/var/log/pods"};
  std::filesystem::path container_logs{"/var/log/containers"};  // the kubelet's links

  // A tree laid out like a host's: PREFIX/proc, PREFIX/sys, PREFIX/dev and the udev
  // database at PREFIX/run/udev/data (or PREFIX/udev/data, as node_exporter's fixtures keep it).
  static SystemRoot under(const std::filesystem::path& prefix);

  // True when the paths are the live host's, i.e. libudev and NVML describe the same machine.
  bool isHost() const;
};

}  // namespace stallwatch::collectors
