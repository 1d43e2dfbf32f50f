// `stallwatch run -- python train.py ...`: starts a training command with zero-code
// instrumentation on (issue 41), the way opentelemetry-instrument and ddtrace-run do: the
// Python package's bootstrap (stallwatch/_bootstrap/sitecustomize.py) first on PYTHONPATH and
// STALLWATCH_AUTO=1, both inherited by every process the command starts (torchrun's ranks,
// srun's tasks), so that every torch DataLoader reports its waits and steps to the agent. The
// command replaces this process (exec): its exit status, signals and terminal are its own.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace stallwatch::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::vector<std::string> command;
  std::string bootstrap;  // the folder holding the bootstrap's sitecustomize.py
};

// Where the package's bootstrap is: as asked, else beside the binary as the .deb installs it
// (bin/ and lib/python3/dist-packages/), else in the source tree a build directory sits in.
std::string findBootstrap(const std::string& asked) {
  if (!asked.empty()) return asked;
  if (const char* env = std::getenv("STALLWATCH_PYTHON_BOOTSTRAP"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    const fs::path dir = exe.parent_path();
    candidates = {dir / "../lib/python3/dist-packages/stallwatch/_bootstrap",
                  dir / "../python/stallwatch/_bootstrap",
                  dir / "../../python/stallwatch/_bootstrap"};
  }
  candidates.emplace_back("/usr/lib/python3/dist-packages/stallwatch/_bootstrap");
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c / "sitecustomize.py", ec))
      return fs::weakly_canonical(c, ec).string();
  }
  return {};
}

int runCommand(const RunArgs& args) {
  const std::string bootstrap = findBootstrap(args.bootstrap);
  if (bootstrap.empty()) {
    std::cerr << "stallwatch run: the Python package's bootstrap was not found (install the "
                 "package, or name its stallwatch/_bootstrap folder with --bootstrap)\n";
    return 2;
  }
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = old && *old ? bootstrap + ":" + old : bootstrap;
  if (setenv("PYTHONPATH", path.c_str(), 1) != 0 || setenv("STALLWATCH_AUTO", "1", 1) != 0) {
    std::cerr << "stallwatch run: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::vector<char*> argv;
  argv.reserve(args.command.size() + 1);
  for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  const int error = errno;
  std::cerr << "stallwatch run: cannot start " << args.command[0] << ": " << std::strerror(error)
            << "\n";
  return error == ENOENT ? 127 : 126;  // as a shell says it
}

}  // namespace

CommandRunner addRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run a training command with its DataLoaders reporting to the agent, no code change: "
      "stallwatch run -- torchrun --nproc-per-node 4 train.py");
  cmd->add_option("--bootstrap", args->bootstrap,
                  "The package's stallwatch/_bootstrap folder (default: found beside the binary "
                  "or in /usr/lib/python3/dist-packages)");
  cmd->add_option("command", args->command, "The command and its arguments, after --")->required();
  cmd->allow_extras(false);
  return [args] { return runCommand(*args); };
}

}  // namespace stallwatch::cli
