// Helpers shared by the tests: fixture paths (CTest passes the fixture directory) and
// scratch directories that clean up after themselves.
#pragma once

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace stallwatch::testing {

// The checkout's tests/fixtures and the build's stand-in NVML library (test_paths.cpp).
const char* builtInFixturesDir();
const char* fakeNvmlPath();

inline std::filesystem::path fixtures() {
  const char* dir = std::getenv("STALLWATCH_FIXTURES");
  return dir ? std::filesystem::path(dir) : std::filesystem::path(builtInFixturesDir());
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "stallwatch-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Names parameterised test cases after their `name` member, as gtest wants them: [A-Za-z0-9_].
struct CaseName {
  template <typename ParamInfo>
  std::string operator()(const ParamInfo& param_info) const {
    std::string n = param_info.param.name;
    for (char& ch : n) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    return n;
  }
};

inline void writeFile(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

}  // namespace stallwatch::testing
