// `stallwatch top`: the running agent's recording as a live terminal view (ncurses), redrawn
// every interval. It only reads the DB (a read-only connection; WAL lets the writer go on),
// so it never slows the agent. Keys: j/k or the arrows switch job, v switches between the
// job's figures and its open incident's evidence, q quits.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>

#include "cli/commands.h"
#include "cli/duration.h"
#include "cli/time_arg.h"
#include "render/top_view.h"
#include "report/top_data.h"
#include "storage/recording.h"
#include "storage/store.h"

// Last: its macros (OK, ERR, timeout) would rewrite the headers above.
#include <curses.h>

namespace stallwatch::cli {
namespace {

struct TopArgs {
  std::string db;
  std::string interval = "1s";
  bool once = false;
  std::string at;  // --once: the frame as of this time (a recording's past)
  bool evidence = false;
  std::optional<int64_t> job;  // the job (its id, as `jobs` lists it) selected first
  int width = 80, height = 24;
};

std::atomic<bool> g_stop{false};

// PICK: the job id to select once it is in the list (--job), cleared when found.
std::vector<std::string> frame(const std::string& path, render::TopState& state, int width,
                               int height, size_t& jobs, std::optional<int64_t>& pick,
                               std::optional<int64_t> at = {}) {
  try {
    auto recording = storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    const model::TopData data = report::readTop(recording, at.value_or(nowMs()));
    jobs = data.jobs.size();
    for (size_t i = 0; pick && i < data.jobs.size(); ++i) {
      if (data.jobs[i].job_id == *pick) {
        state.selected = i;
        pick.reset();
      }
    }
    return render::renderTop(data, state, width, height);
  } catch (const std::exception& e) {
    jobs = 0;
    return {"stallwatch top: cannot read " + path, e.what(), "", "(trying again each interval)"};
  }
}

int runTop(const TopArgs& args) {
  const std::string path = args.db.empty() ? storage::defaultReadingPath().string() : args.db;
  const auto interval = parseDuration(args.interval);
  if (!interval || *interval < std::chrono::milliseconds(100)) {
    std::cerr << "stallwatch top: --interval must be a duration of 100ms or more\n";
    return 2;
  }
  render::TopState state;
  state.evidence = args.evidence;
  std::optional<int64_t> pick = args.job;
  size_t jobs = 0;
  std::optional<int64_t> at;
  if (!args.at.empty() && !(at = parseTimeArg(args.at, nowMs()))) {
    std::cerr << "stallwatch top: --at " << args.at << " is not a time (see --help of report)\n";
    return 2;
  }
  if (args.once) {  // one frame on stdout, for scripts and for people without a terminal
    try {           // a recording that cannot be read is an error here, not a frame that says so
      storage::Recording::open(path, storage::Recording::Needs::kJobTables);
    } catch (const std::exception& e) {
      std::cerr << "stallwatch top: cannot read " << path << ": " << e.what() << "\n";
      return 1;
    }
    const auto lines = frame(path, state, args.width, args.height, jobs, pick, at);
    if (pick) {
      std::cerr << "stallwatch top: no job " << *pick << " in the view of " << path
                << " (`stallwatch jobs` lists the recorded ones)\n";
      return 1;
    }
    for (const auto& line : lines) std::cout << line << "\n";
    return 0;
  }
  // The live view redraws a terminal forever: into a file or a pipe it would write screen
  // codes until killed.
  if (::isatty(STDOUT_FILENO) == 0 || ::isatty(STDIN_FILENO) == 0) {
    std::cerr << "stallwatch top: the live view needs a terminal (stdin and stdout); for a "
                 "script or a file, use --once\n";
    return 2;
  }
  std::signal(SIGINT, [](int) { g_stop = true; });
  std::signal(SIGTERM, [](int) { g_stop = true; });
  if (!initscr()) {
    std::cerr << "stallwatch top: no terminal (use --once to print one frame)\n";
    return 1;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(*interval).count()));
  while (!g_stop) {
    const auto lines = frame(path, state, COLS, LINES, jobs, pick);
    erase();
    for (size_t i = 0; i < lines.size(); ++i)
      mvaddnstr(static_cast<int>(i), 0, lines[i].c_str(), COLS);
    refresh();
    const int key = getch();
    if (key == 'q' || key == 'Q') break;
    if ((key == 'j' || key == KEY_DOWN) && state.selected + 1 < jobs) ++state.selected;
    if ((key == 'k' || key == KEY_UP) && state.selected > 0) --state.selected;
    if (key == 'v' || key == '\t') state.evidence = !state.evidence;
  }
  endwin();
  return 0;
}

}  // namespace

CommandRunner addTopCommand(CLI::App& app) {
  auto args = std::make_shared<TopArgs>();
  auto* cmd = app.add_subcommand(
      "top", "Live view of the agent's recording: jobs, ranks, devices, open incidents");
  cmd->add_option("--db", args->db, "The recording (default: the agent's default DB)");
  cmd->add_option("--interval", args->interval, "Redraw every (default 1s)");
  cmd->add_flag("--once", args->once, "Print one frame to stdout and exit (no terminal needed)");
  cmd->add_option("--at", args->at,
                  "With --once: the frame as it was at this time (a post-mortem)");
  cmd->add_flag("--evidence", args->evidence, "Start with the open incident's evidence (key v)");
  cmd->add_option("--job", args->job,
                  "Start with this job selected (its id, as `stallwatch jobs` lists it)");
  cmd->add_option("--width", args->width, "With --once: the frame's width (default 80)")
      ->check(CLI::Range(20, 1000));
  cmd->add_option("--height", args->height, "With --once: the frame's height (default 24)")
      ->check(CLI::Range(5, 1000));
  return [args] { return runTop(*args); };
}

}  // namespace stallwatch::cli
