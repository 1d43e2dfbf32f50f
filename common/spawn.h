// Starting a program the way stallwatch starts every outside program (hooks, smartctl):
// directly with posix_spawnp, never through a shell; a fixed environment; a process group of
// its own, so that a timeout can kill it with whatever it started; the default disposition
// and an empty mask for every signal (the agent blocks its stop signals, and a child must
// not inherit that).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace stallwatch::common {

// The PATH every child gets.
inline constexpr const char* kChildPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the caller's PATH
  std::vector<std::pair<std::string, std::string>> environment;  // besides PATH
  int stdin_fd = -1;                                             // dup'ed onto 0; -1: /dev/null
  int stdout_fd = -1;                                            // dup'ed onto 1; -1: /dev/null
  bool inherit_stderr = false;                                   // else /dev/null
};

// Returns the child's pid, or -1 with ERROR set.
pid_t spawnDirect(const SpawnSpec& spec, std::string& error);

// Kills PID's whole process group and PID itself.
void killGroup(pid_t pid);

// Kills PID, its process group, and every process descended from it with their groups: a
// child that left the group (setsid, a daemonising hook) goes too. Descendants are found by
// their parent links in /proc at the time of the call.
void killTree(pid_t pid);

}  // namespace stallwatch::common
