#include "cli/live_options.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>

#include "agent/recorder.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/input_file.h"
#include "common/text.h"

namespace stallwatch::cli {

void addLiveOptions(CLI::App& cmd, LiveArgs& args) {
  cmd.add_flag("--correlate,!--no-correlate", args.correlate,
               "Run the stall correlator every interval and report incidents as they happen")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--on-incident", args.hook,
                 "Run PROGRAM [ARGS...] for each incident event (open, change, close): no shell, "
                 "the event as JSON on stdin and in STALLWATCH_* variables")
      ->expected(1, -1)
      ->group("Live");
  cmd.add_option("--hook-timeout", args.hook_timeout, "Kill a hook still running after this long")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--hook-concurrency", args.hook_concurrency, "Hooks running at once, at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group("Live");
  cmd.add_option("--webhook", args.webhook,
                 "POST each incident event to this http(s) URL (Alertmanager webhook JSON with a "
                 "'text' field for chat), with retries and backoff. A URL with a secret in it is "
                 "better given by --webhook-file or $STALLWATCH_WEBHOOK_URL: the command line is "
                 "visible to every user in ps")
      ->envname("STALLWATCH_WEBHOOK_URL")
      ->group("Live");
  cmd.add_option("--webhook-file", args.webhook_file,
                 "Read the webhook URL from the first line of this file")
      ->group("Live");
  cmd.add_option("--webhook-timeout", args.webhook_timeout, "Timeout of one webhook request")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--webhook-attempts", args.webhook_attempts, "Tries per event before giving it up")
      ->capture_default_str()
      ->check(CLI::Range(1, 20))
      ->group("Live");
  cmd.add_option("--listen", args.listen,
                 "Serve Prometheus metrics at ADDR/metrics: :PORT on every interface (as "
                 "node_exporter's :9100), HOST:PORT or [V6]:PORT on one, 127.0.0.1:PORT on "
                 "loopback only; stallwatch's port is 9877 (off by default)")
      ->group("Live");
  cmd.add_option("--otlp-endpoint", args.otlp_endpoint,
                 "Also push the metrics to this OTLP/HTTP receiver (JSON), as an OpenTelemetry "
                 "Collector or Prometheus 3 takes them: a base URL (http://collector:4318, "
                 "'/v1/metrics' added) or the metrics URL itself (off by default)")
      ->group("Live");
  cmd.add_option("--otlp-interval", args.otlp_interval, "How often to push them")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--otlp-header", args.otlp_headers,
                 "A header on every push, 'Name: value' (an API key, a tenant); repeatable")
      ->group("Live");
  cmd.add_option("--node", args.node,
                 "This node's name: the node label on metrics, the host in hook payloads and "
                 "in the recording (default: the host name); for containers, or one host "
                 "standing in for several nodes")
      ->group("Live");
  cmd.add_option("--stall-open-after", args.open_after,
                 "Report a stall once it has lasted this long")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--stall-open-after-strong", args.strong_open_after,
                 "Report a storage stall with strong evidence (the job's reads at its io.max "
                 "limit, its threads waiting on a device that got slow) once it has lasted this "
                 "long; 0 waits for --stall-open-after like any other")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--stall-close-after", args.close_after,
                 "Close an incident after this long without a stall (shorter gaps keep it open)")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--idle-stall-open-after", args.idle_open_after,
                 "Report a stall during which the job's processes sit idle (no CPU, no reads, "
                 "no I/O wait) only once it has lasted this long: a job winding down idles so "
                 "before it exits; past this it is a hang")
      ->capture_default_str()
      ->group("Live");
  cmd.add_option("--notify-repeat-window", args.repeat_window,
                 "A stall of the same job, class and device opening again within this long is "
                 "not notified again")
      ->capture_default_str()
      ->group("Live");
}

namespace {

// What the senders post to: http:// or https://, nothing else libcurl would take.
bool isHttpUrl(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

}  // namespace

std::optional<agent::LiveOptions> toLiveOptions(const LiveArgs& args, const std::string& command) {
  agent::LiveOptions o;
  o.correlate = args.correlate;
  o.host = args.node.empty() ? agent::hostName() : args.node;
  auto duration = [&](const std::string& text,
                      const char* option) -> std::optional<std::chrono::nanoseconds> {
    auto d = parseDuration(text);
    if (!d)
      std::cerr << "stallwatch " << command << ": " << option << " '" << text
                << "' is not a duration (examples: 500ms, 10s, 5m)\n";
    return d;
  };
  const auto open_after = duration(args.open_after, "--stall-open-after");
  const auto close_after = duration(args.close_after, "--stall-close-after");
  const auto strong_open_after = duration(args.strong_open_after, "--stall-open-after-strong");
  const auto idle_open_after = duration(args.idle_open_after, "--idle-stall-open-after");
  const auto repeat = duration(args.repeat_window, "--notify-repeat-window");
  const auto hook_timeout = duration(args.hook_timeout, "--hook-timeout");
  const auto webhook_timeout = duration(args.webhook_timeout, "--webhook-timeout");
  if (!open_after || !close_after || !strong_open_after || !idle_open_after || !repeat ||
      !hook_timeout || !webhook_timeout)
    return std::nullopt;
  o.correlator.open_after_s = std::chrono::duration<double>(*open_after).count();
  o.correlator.close_after_s = std::chrono::duration<double>(*close_after).count();
  o.correlator.strong_open_after_s = std::chrono::duration<double>(*strong_open_after).count();
  o.correlator.idle_open_after_s = std::chrono::duration<double>(*idle_open_after).count();
  o.repeat_window = std::chrono::duration_cast<std::chrono::milliseconds>(*repeat);
  if (!args.hook.empty()) {
    if (const std::string why = whyNotRunnable(args.hook.front()); !why.empty()) {
      std::cerr << "stallwatch " << command << ": --on-incident " << args.hook.front() << ": "
                << why << "\n";
      return std::nullopt;
    }
    agent::HookConfig h;
    h.argv = args.hook;
    h.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*hook_timeout);
    h.max_concurrent = args.hook_concurrency;
    o.hook = h;
  }
  std::string webhook = args.webhook;
  if (!args.webhook_file.empty()) {
    if (const std::string why = whyNotARegularFile(args.webhook_file); !why.empty()) {
      std::cerr << "stallwatch " << command << ": --webhook-file " << args.webhook_file << ": "
                << why << "\n";
      return std::nullopt;
    }
    std::ifstream in(args.webhook_file);
    if (!in || !std::getline(in, webhook)) {
      std::cerr << "stallwatch " << command << ": cannot read a URL from --webhook-file "
                << args.webhook_file << "\n";
      return std::nullopt;
    }
    while (!webhook.empty() && (webhook.back() == '\r' || webhook.back() == ' '))
      webhook.pop_back();
  }
  if (!webhook.empty()) {
    if (!isHttpUrl(webhook)) {
      std::cerr << "stallwatch " << command << ": the webhook '" << agent::redactUrl(webhook)
                << "' is not an http:// or https:// URL\n";
      return std::nullopt;
    }
    agent::WebhookConfig w;
    w.url = webhook;
    w.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*webhook_timeout);
    w.max_attempts = args.webhook_attempts;
    o.webhook = w;
  }
  if (!args.listen.empty()) {
    o.listen = agent::parseListenAddress(args.listen);
    if (!o.listen) {
      std::cerr << "stallwatch " << command << ": --listen '" << args.listen
                << "' is not PORT, :PORT, HOST:PORT or [V6]:PORT (examples: 9877, 0.0.0.0:9877)\n";
      return std::nullopt;
    }
  }
  if (!args.otlp_endpoint.empty()) {
    const auto interval = duration(args.otlp_interval, "--otlp-interval");
    if (!interval) return std::nullopt;
    if (!isHttpUrl(args.otlp_endpoint)) {
      std::cerr << "stallwatch " << command
                << ": --otlp-endpoint needs an http:// or https:// URL (http://collector:4318)\n";
      return std::nullopt;
    }
    for (const auto& h : args.otlp_headers) {
      const size_t colon = h.find(':');
      if (colon == 0 || colon == std::string::npos ||
          h.find_first_of("\r\n") != std::string::npos) {
        std::cerr << "stallwatch " << command << ": --otlp-header '" << common::printable(h)
                  << "' is not 'Name: value'\n";
        return std::nullopt;
      }
    }
    agent::OtlpConfig otlp;
    otlp.endpoint = args.otlp_endpoint;
    otlp.interval = std::chrono::duration_cast<std::chrono::milliseconds>(*interval);
    otlp.headers = args.otlp_headers;
    o.otlp = otlp;
  }
  if ((o.hook || o.webhook) && !o.correlate) {
    std::cerr << "stallwatch " << command
              << ": --on-incident and --webhook need the correlator (drop --no-correlate)\n";
    return std::nullopt;
  }
  return o;
}

namespace {

// CLI11 reads past lines it cannot parse (an unclosed "[record", a key without "="): a file
// saved half-edited would then reload as defaults. The line that is neither a section, a
// "key = value", a comment nor part of a multi-line array, or none.
std::optional<std::string> configSyntaxError(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "cannot read " + path;
  std::string line;
  int number = 0, open_brackets = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    const size_t last = line.find_last_not_of(" \t\r");
    const bool section = line[first] == '[' && line[last] == ']';
    if (open_brackets == 0 && !section && line.find('=') == std::string::npos)
      return fmt::format("{}:{}: not a [section] or key = value: {}", path, number, line);
    if (section) continue;
    // A multi-line array: its brackets open in a value and close on a later line.
    const size_t eq = line.find('=');
    for (char c : std::string_view(line).substr(eq == std::string::npos ? 0 : eq))
      open_brackets += c == '[' ? 1 : c == ']' ? -1 : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<agent::LiveOptions> reloadLiveOptions(
    const std::vector<std::string>& command_line, const std::string& command,
    const std::map<std::string, std::string>& fixed_at_start) {
  // The same parser as at start, knowing only the options that can change: the others, on
  // the command line or in the file, are let through unread.
  CLI::App app;
  app.allow_extras();
  app.fallthrough();
  app.set_config("--config", kDefaultConfigFile);
  app.allow_config_extras(CLI::config_extras_mode::ignore);
  std::string log_level = "info";
  app.add_option("--log-level", log_level);
  CLI::App* cmd = app.add_subcommand(command);
  cmd->allow_extras();
  LiveArgs args;
  addLiveOptions(*cmd, args);
  // Options that only a restart changes: read, to say so when the file changed them.
  std::map<std::string, std::string> fixed = fixed_at_start;
  for (auto& [name, value] : fixed) cmd->add_option("--" + name, value);
  std::vector<std::string> reversed(command_line.rbegin(), command_line.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    spdlog::error("reload: {}", e.what());
    return std::nullopt;
  }
  if (app.get_config_ptr()->empty()) {
    spdlog::warn("reload: no --config file to read again");
    return std::nullopt;
  }
  if (auto error = configSyntaxError(app.get_config_ptr()->as<std::string>())) {
    spdlog::error("reload: {}", *error);
    return std::nullopt;
  }
  // The whole parser, as at start: a key that names no option is refused here too.
  if (const std::string error = validateCommandLine(command_line); !error.empty()) {
    spdlog::error("reload: {}; the options in force are kept", error);
    return std::nullopt;
  }
  for (const auto& [name, value] : fixed) {
    if (value != fixed_at_start.at(name)) {
      spdlog::warn(
          "reload: --{} changed from {} to {}: not reloaded, it takes effect at the "
          "next start",
          name, fixed_at_start.at(name), value);
    }
  }
  const auto level = spdlog::level::from_str(log_level);
  spdlog::set_level(level);
  return toLiveOptions(args, command);
}

void logLiveSummary(const std::array<uint64_t, 3>& events, const agent::NotifierStats& notifier,
                    const std::optional<agent::HookStats>& hooks,
                    const std::optional<agent::WebhookStats>& webhook) {
  spdlog::info(
      "incidents: {} opened, {} changed, {} closed; {} events notified, {} suppressed as flaps",
      events[0], events[1], events[2], notifier.sent, notifier.suppressed);
  if (hooks) {
    spdlog::info(
        "hook: {} started, {} succeeded, {} failed, {} killed at the timeout, {} could not start, "
        "{} dropped",
        hooks->started, hooks->succeeded, hooks->failed, hooks->timed_out, hooks->spawn_errors,
        hooks->dropped);
  }
  if (webhook) {
    spdlog::info("webhook: {} delivered, {} failed attempts, {} given up, {} dropped",
                 webhook->delivered, webhook->failed_attempts, webhook->given_up, webhook->dropped);
  }
}

}  // namespace stallwatch::cli
