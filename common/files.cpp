#include "common/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace stallwatch::common {

std::string whyNotARegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file (a FIFO, a device or a folder)";
  return {};
}

}  // namespace stallwatch::common
