#include "cli/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace stallwatch::cli {

std::string whyNotRunnable(const std::string& program) {
  if (program.empty()) return "no program named";
  auto check = [](const std::string& path) -> std::string {
    if (std::string why = whyNotARegularFile(path); !why.empty()) return why;
    if (::access(path.c_str(), X_OK) != 0) return "not executable";
    return {};
  };
  if (program.find('/') != std::string::npos) return check(program);
  const char* env = std::getenv("PATH");
  std::string_view dirs = env ? env : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    const size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    if (!dir.empty() && check(std::string(dir) + "/" + program).empty()) return {};
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
  }
  return "not found on $PATH";
}

}  // namespace stallwatch::cli
