#pragma once
// Where the agent's log lines go and how they look (issue 43): to the journal, as systemd reads a
// service's stderr, one line a message with its syslog priority ("<4>...") and no timestamp of
// its own (the journal stamps each line; `journalctl -p warning` then filters); to a terminal or
// a file, with the date, the time and its zone.

#include <string>

namespace stallwatch::cli {

// Sets the default logger at LEVEL; SPDLOG_LEVEL in the environment overrides it.
void setUpLogging(const std::string& level);

// Whether stderr is the journal's stream: JOURNAL_STREAM ("DEV:INODE", set by systemd for a
// service whose output goes to the journal) names stderr's own device and inode.
bool stderrIsTheJournal();

// A status line kept at the bottom of a terminal (record's progress), rewritten in place; a
// log line clears it first. Nothing is written when stderr is not a terminal.
bool stderrIsATerminal();
void showStatusLine(const std::string& text);
void clearStatusLine();

}  // namespace stallwatch::cli
