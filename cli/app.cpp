#include "cli/app.h"

#include <iostream>

#include "agent/build_info.h"
#include "cli/completion.h"
#include "cli/input_file.h"
#include "cli/usage.h"

namespace stallwatch::cli {

void configureApp(CLI::App& app, AppCommands& commands) {
  app.formatter(std::make_shared<HelpFormatter>());  // before the commands: they take it over
  app.footer(
      "\nExamples:\n  stallwatch record                 follow every training job\n"
      "  stallwatch report --since 1h      what went wrong in the last hour\n"
      "  stallwatch top                    the live view\n"
      "Each command's --help says more (stallwatch report --help).");
  app.set_version_flag("--version", std::string("stallwatch ") + STALLWATCH_VERSION + " (" +
                                        agent::kBuildRevision + ")");
  app.require_subcommand(1);
  // Every option can come from a file too (a [record] section for the record command's, and
  // so on): long command lines, and no webhook secret in `ps`. The command line wins.
  app.set_config(
      "--config", kDefaultConfigFile,
      "Read options from this TOML/INI file, one [COMMAND] section per command, "
      "e.g. [record] webhook = \"https://...\" (default: /etc/stallwatch/stallwatch.conf "
      "where it exists)");
  // A key that names no option is a typo to report, not a setting to drop silently.
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.fallthrough();  // global options (--log-level) also after the subcommand
  app.add_flag("--utc", commands.utc,
               "Show times in UTC, and read a time without an offset (--since 2026-11-22T02:00) "
               "as UTC; by default both are the local zone's, the zone said beside each time");
  app.add_option("--log-level", commands.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  auto add = [&](CommandRunner (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    auto runner = adder(app);
    commands.runners[app.get_subcommands({}).at(before)] = std::move(runner);
  };
  add(addRecordCommand);
  add(addDevicesCommand);
  add(addJobsCommand);
  add(addIncidentsCommand);
  add(addReportCommand);
  add(addReplayCommand);
  add(addExportCommand);
  add(addHealthCommand);
  add(addTopCommand);
  add(addRunCommand);
  {
    CommandRunner runner;
    addCompletionCommand(app, runner);
    commands.runners[app.get_subcommands({}).back()] = std::move(runner);
  }
  addExamples(app);
}

std::string configFileProblem(const std::vector<std::string>& args) {
  std::string path;
  bool named = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
      named = true;
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
      named = true;
    }
  }
  if (!named) {
    std::error_code ec;
    if (!std::filesystem::exists(kDefaultConfigFile, ec)) return {};
    path = kDefaultConfigFile;
  }
  if (const std::string why = whyNotARegularFile(path); !why.empty())
    return "--config " + path + ": " + why;
  return {};
}

std::string validateCommandLine(const std::vector<std::string>& command_line) {
  CLI::App app;
  AppCommands commands;
  configureApp(app, commands);
  std::vector<std::string> reversed(command_line.rbegin(), command_line.rend());
  if (std::string problem = configFileProblem(command_line); !problem.empty()) return problem;
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return {};
}

}  // namespace stallwatch::cli
