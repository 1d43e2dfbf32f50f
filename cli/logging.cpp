#include "cli/logging.h"

#include <spdlog/cfg/env.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace stallwatch::cli {
namespace {

// sd-daemon(3)'s prefixes: the journal takes "<N>" at the start of a line as its priority.
class SyslogPriority : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPrefix[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const auto level = static_cast<size_t>(msg.level);
    const char* p = kPrefix[level < std::size(kPrefix) ? level : 6];
    dest.append(p, p + std::strlen(p));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriority>();
  }
};

}  // namespace

bool stderrIsTheJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(STDERR_FILENO, &st) == 0 && static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

bool stderrIsATerminal() { return ::isatty(STDERR_FILENO) == 1; }

void showStatusLine(const std::string& text) {
  if (!stderrIsATerminal()) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
}

void clearStatusLine() {
  if (!stderrIsATerminal()) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

void setUpLogging(const std::string& level) {
  // Logs go to stderr so that stdout carries only a command's output (tables, JSON).
  auto logger = spdlog::stderr_color_mt("stallwatch");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (stderrIsTheJournal()) {
    formatter->add_flag<SyslogPriority>('*').set_pattern("%*%v");
  } else if (stderrIsATerminal()) {
    // "\r\033[K" first: a status line at the bottom (showStatusLine) is cleared, not run into.
    formatter->set_pattern("\r\033[K[%Y-%m-%d %H:%M:%S.%e %z] [%^%l%$] %v");
  } else {
    formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e %z] [%^%l%$] %v");  // local time, zone said
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL overrides, as spdlog users expect
}

}  // namespace stallwatch::cli
