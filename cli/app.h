#pragma once
// The program's command line: every subcommand and the global options, set up once for main
// and again for a reload's check of the config file.

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace stallwatch::cli {

struct AppCommands {
  std::map<CLI::App*, CommandRunner> runners;
  std::string log_level = "info";
  bool utc = false;  // --utc: times shown and read in UTC rather than the local zone
};

// Registers the global options and every subcommand on APP.
void configureApp(CLI::App& app, AppCommands& commands);

// Why the config file ARGS name (--config X, --config=X, or the default where it exists)
// cannot be read ("" where it can): a FIFO or a device would block the parser for ever.
std::string configFileProblem(const std::vector<std::string>& args);

// COMMAND_LINE (the program's arguments after its name) parsed by the whole parser, the config
// file included: its error ("" where none). A reload checks the file so, as the start did.
std::string validateCommandLine(const std::vector<std::string>& command_line);

}  // namespace stallwatch::cli
