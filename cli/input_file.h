#pragma once
// Files the commands read that an operator names (--config, --webhook-file, an --on-incident
// program): checked before they are opened, so that a FIFO or a device given by mistake is a
// clear error rather than a read that blocks for ever, deaf to signals.

#include <string>

#include "common/files.h"

namespace stallwatch::cli {

using common::whyNotARegularFile;  // a small input file: common/files.h

// Why PROGRAM cannot be started ("" where it can): a path that is missing, not a regular file
// or not executable; a bare name found nowhere on $PATH.
std::string whyNotRunnable(const std::string& program);

}  // namespace stallwatch::cli
