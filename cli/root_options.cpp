#include "cli/root_options.h"

#include <algorithm>

#include "cli/commands.h"

namespace stallwatch::cli {

void addRootOptions(CLI::App& command, RootOptions& options) {
  command
      .add_option("--root", options.prefix,
                  "Read a captured system tree: DIR/proc, DIR/sys and DIR/run/udev/data "
                  "(for tests and replays)")
      ->check(CLI::ExistingDirectory)
      ->group("System root");
  command.add_option("--proc", options.proc, "procfs mount point (default /proc)")
      ->check(CLI::ExistingDirectory)
      ->group("System root");
  command.add_option("--sys", options.sys, "sysfs mount point (default /sys)")
      ->check(CLI::ExistingDirectory)
      ->group("System root");
  command.add_option("--udev-data", options.udev_data, "udev database (default /run/udev/data)")
      ->group("System root");
}

collectors::SystemRoot toSystemRoot(const RootOptions& options) {
  collectors::SystemRoot root = options.prefix.empty()
                                    ? collectors::SystemRoot{}
                                    : collectors::SystemRoot::under(options.prefix);
  if (!options.proc.empty()) root.proc = options.proc;
  if (!options.sys.empty()) root.sys = options.sys;
  if (!options.udev_data.empty()) root.udev_data = options.udev_data;
  return root;
}

namespace {
std::vector<std::string>& storedCommandLine() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void rememberCommandLine(int argc, char** argv) {
  storedCommandLine().assign(argv + std::min(argc, 1), argv + argc);
}
const std::vector<std::string>& commandLine() { return storedCommandLine(); }

}  // namespace stallwatch::cli
