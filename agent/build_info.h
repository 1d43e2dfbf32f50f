#pragma once
// What the binary was built from, for stallwatch_build_info and --version.

namespace stallwatch::agent {

// `git describe --always --dirty` of the source tree when CMake configured it ("unknown" from
// a tree without git): a configured file of its own, so that a new revision rebuilds one object.
extern const char* const kBuildRevision;

}  // namespace stallwatch::agent
