// --root, --proc, --sys, --udev-data: where the commands that read the system find it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "collectors/system_root.h"

namespace stallwatch::cli {

struct RootOptions {
  std::string prefix;
  std::string proc;
  std::string sys;
  std::string udev_data;
};

void addRootOptions(CLI::App& command, RootOptions& options);
collectors::SystemRoot toSystemRoot(const RootOptions& options);

}  // namespace stallwatch::cli
