// The live options `record` and `replay` share: the correlator's timing, the incident hook,
// the webhook, the Prometheus endpoint and the OTLP export.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/live_pipeline.h"

namespace stallwatch::cli {

struct LiveArgs {
  bool correlate = true;
  std::vector<std::string> hook;
  std::string hook_timeout = "30s";
  size_t hook_concurrency = 4;
  std::string webhook;
  std::string webhook_file;
  std::string webhook_timeout = "5s";
  int webhook_attempts = 5;
  std::string listen;
  std::string otlp_endpoint;
  std::string otlp_interval = "15s";
  std::vector<std::string> otlp_headers;
  std::string open_after = "3s";
  std::string strong_open_after = "2s";
  std::string close_after = "10s";
  std::string idle_open_after = "2m";
  std::string repeat_window = "10m";
  std::string node;  // "": the host name
};

void addLiveOptions(CLI::App& cmd, LiveArgs& args);
// Nullopt after printing why the arguments are wrong. COMMAND names the subcommand in errors.
std::optional<agent::LiveOptions> toLiveOptions(const LiveArgs& args, const std::string& command);
// SIGHUP: the live options and the log level read again as at start, COMMAND_LINE (the
// program's arguments) over the --config file it names over the defaults, for the subcommand
// COMMAND. Sets the log level; nullopt after logging why the file cannot be used (its syntax, or
// anything the whole parser refuses, an unknown key included). FIXED_AT_START: options only a
// restart changes (name without "--" -> value at start), said in a warning when changed.
std::optional<agent::LiveOptions> reloadLiveOptions(
    const std::vector<std::string>& command_line, const std::string& command,
    const std::map<std::string, std::string>& fixed_at_start = {});
void logLiveSummary(const std::array<uint64_t, 3>& events, const agent::NotifierStats& notifier,
                    const std::optional<agent::HookStats>& hooks,
                    const std::optional<agent::WebhookStats>& webhook);

}  // namespace stallwatch::cli
