#pragma once
// Shell completion for bash and zsh, written from the parser itself (issue 44): every command
// and each of its options as registered, so a new option completes with no script to edit.
// `stallwatch completion bash|zsh` prints it; the package installs both.

#include <CLI/CLI.hpp>
#include <string>

namespace stallwatch::cli {

// The completion script of APP for SHELL ("bash" or "zsh"); "" for another shell.
std::string completionScript(const CLI::App& app, const std::string& shell);

// Registers `completion SHELL` on APP, whose script it writes to stdout.
void addCompletionCommand(CLI::App& app, std::function<int()>& runner);

}  // namespace stallwatch::cli
