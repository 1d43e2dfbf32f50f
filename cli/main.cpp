// stallwatch: a storage and I/O health monitor for GPU training jobs.
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "cli/commands.h"

namespace {

int run(int argc, char** argv) {
  stallwatch::cli::rememberCommandLine(argc, argv);
  CLI::App app{"stallwatch: finds the storage behind GPU stalls in training jobs"};
  app.set_version_flag("--version", std::string("stallwatch ") + STALLWATCH_VERSION);
  app.require_subcommand(1);
  // Every option can come from a file too (a [record] section for the record command's, and
  // so on): long command lines, and no webhook secret in `ps`. The command line wins.
  app.set_config(
      "--config", stallwatch::cli::kDefaultConfigFile,
      "Read options from this TOML/INI file, one [COMMAND] section per command, "
      "e.g. [record] webhook = \"https://...\" (default: /etc/stallwatch/stallwatch.conf "
      "where it exists)");
  // A key that names no option is a typo to report, not a setting to drop silently.
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.fallthrough();  // global options (--log-level) also after the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  std::map<CLI::App*, stallwatch::cli::CommandRunner> runners;
  auto add = [&](stallwatch::cli::CommandRunner (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    auto runner = adder(app);
    runners[app.get_subcommands({}).at(before)] = std::move(runner);
  };
  add(stallwatch::cli::addRecordCommand);
  add(stallwatch::cli::addDevicesCommand);
  add(stallwatch::cli::addJobsCommand);
  add(stallwatch::cli::addIncidentsCommand);
  add(stallwatch::cli::addReportCommand);
  add(stallwatch::cli::addReplayCommand);
  add(stallwatch::cli::addExportCommand);
  add(stallwatch::cli::addHealthCommand);
  add(stallwatch::cli::addTopCommand);

  CLI11_PARSE(app, argc, argv);
  // Logs go to stderr so that stdout carries only a command's output (tables, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("stallwatch"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL overrides, as spdlog users expect
  for (CLI::App* sub : app.get_subcommands()) return runners.at(sub)();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // A command that meets something it did not expect says so and exits 1; it does not abort.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stallwatch: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "stallwatch: unexpected error\n");
  }
  return 1;
}
