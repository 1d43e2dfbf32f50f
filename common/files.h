#pragma once
// Files an operator names that a command reads (a config file, a token, a CA bundle, a hook):
// checked before anything opens them, so that a FIFO or a device given by mistake is a clear
// error rather than a read that blocks for ever or never ends.

#include <string>

namespace stallwatch::common {

// Why PATH cannot be read as a small input file ("" where it can): missing, or not a regular
// file (a FIFO, a device, a folder).
std::string whyNotARegularFile(const std::string& path);

}  // namespace stallwatch::common
