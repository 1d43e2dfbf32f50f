// The subcommands. Each registers its options on the CLI11 app and returns the function that
// runs it once parsing succeeded.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace stallwatch::cli {

using CommandRunner = std::function<int()>;

// Read when it exists and no --config names another (the package installs it, all commented).
inline constexpr const char* kDefaultConfigFile = "/etc/stallwatch/stallwatch.conf";

// The program's arguments as given (main sets them): what a reload parses again.
void rememberCommandLine(int argc, char** argv);
const std::vector<std::string>& commandLine();

CommandRunner addRecordCommand(CLI::App& app);
CommandRunner addDevicesCommand(CLI::App& app);
CommandRunner addJobsCommand(CLI::App& app);
CommandRunner addIncidentsCommand(CLI::App& app);
CommandRunner addReportCommand(CLI::App& app);
CommandRunner addReplayCommand(CLI::App& app);
CommandRunner addHealthCommand(CLI::App& app);
CommandRunner addExportCommand(CLI::App& app);
CommandRunner addTopCommand(CLI::App& app);
CommandRunner addRunCommand(CLI::App& app);

}  // namespace stallwatch::cli
