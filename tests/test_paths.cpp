// The paths CMake knows of the checkout and the build, compiled into this one small file alone:
// as compile definitions of every test file they made each of them a compiler-cache miss in a
// checkout at another path (CI's clean clone rebuilt all of tests/).
#include "test_support.h"

namespace stallwatch::testing {

const char* builtInFixturesDir() { return STALLWATCH_FIXTURES_DIR; }
const char* fakeNvmlPath() { return FAKE_NVML_PATH; }

}  // namespace stallwatch::testing
