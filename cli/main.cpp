// stallwatch: a storage and I/O health monitor for GPU training jobs.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/logging.h"
#include "cli/usage.h"
#include "common/time_zone.h"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse too (status 0); every other error is a usage error,
    // status 2 as for any Unix tool (CLI11's own statuses were 104-114).
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(
        stderr, "%s\n",
        stallwatch::cli::usageError(app, e, std::vector<std::string>(argv + 1, argv + argc))
            .c_str());
    return 2;
  }
  stallwatch::common::showTimesInUtc(commands.utc);
  stallwatch::cli::setUpLogging(commands.log_level);
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
