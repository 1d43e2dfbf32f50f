// stallwatch: a storage and I/O health monitor for GPU training jobs.
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/app.h"

namespace {

int run(int argc, char** argv) {
  stallwatch::cli::rememberCommandLine(argc, argv);
  CLI::App app{"stallwatch: finds the storage behind GPU stalls in training jobs"};
  stallwatch::cli::AppCommands commands;
  stallwatch::cli::configureApp(app, commands);
  if (const std::string problem =
          stallwatch::cli::configFileProblem(std::vector<std::string>(argv + 1, argv + argc));
      !problem.empty()) {
    std::fprintf(stderr, "stallwatch: %s\n", problem.c_str());
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  // Logs go to stderr so that stdout carries only a command's output (tables, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("stallwatch"));
  spdlog::set_level(spdlog::level::from_str(commands.log_level));
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL overrides, as spdlog users expect
  for (CLI::App* sub : app.get_subcommands()) return commands.runners.at(sub)();
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
