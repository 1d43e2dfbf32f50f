#include "common/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace stallwatch::common {

pid_t spawnDirect(const SpawnSpec& spec, std::string& error) {
  if (spec.argv.empty()) {
    error = "no program";
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (spec.stdin_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, spec.stdin_fd, STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (spec.stdout_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, spec.stdout_fd, STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  }
  if (!spec.inherit_stderr)
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> env_strings{std::string("PATH=") + kChildPath};
  for (const auto& [name, value] : spec.environment) {
    std::string v = value;  // a NUL would cut the variable short
    v.erase(std::remove(v.begin(), v.end(), '\0'), v.end());
    env_strings.push_back(name + "=");
    env_strings.back() += v;
  }
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error = "cannot run " + spec.argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  return pid;
}

void killGroup(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

namespace {

// The parent of every process, from /proc/N/stat (the field after the command's ')').
std::map<pid_t, std::vector<pid_t>> childrenByParent() {
  std::map<pid_t, std::vector<pid_t>> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::string path = std::string("/proc/") + e->d_name + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* close = std::strrchr(buf, ')');
    if (!close) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2)
      children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return children;
}

}  // namespace

void killTree(pid_t pid) {
  const auto children = childrenByParent();
  std::vector<pid_t> tree{pid};
  for (size_t i = 0; i < tree.size() && tree.size() < 4096; ++i) {
    if (auto it = children.find(tree[i]); it != children.end())
      tree.insert(tree.end(), it->second.begin(), it->second.end());
  }
  // Stopped first, so that none forks again between the reading and the kill.
  for (pid_t p : tree) ::kill(p, SIGSTOP);
  for (pid_t p : tree) {
    ::kill(-p, SIGKILL);  // its group, where it leads one (ESRCH otherwise)
    ::kill(p, SIGKILL);
  }
}

}  // namespace stallwatch::common
