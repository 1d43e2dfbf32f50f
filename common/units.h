#pragma once
// Byte rates written the way the kernel's io.max limits are read by people: in MiB/s, one
// decimal. A limit and the reads held against it say the same unit (issue 44: "20.7 MB/s"
// beside "rbps=20.0 MiB/s" in one sentence).

#include <cstdio>
#include <string>

namespace stallwatch::common {

inline std::string mibPerSecondText(double bytes_per_s) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f MiB/s", bytes_per_s / (1024.0 * 1024.0));
  return text;
}

}  // namespace stallwatch::common
