// swslowfs: a read-only FUSE passthrough of one directory whose reads can be made slow, for
// the end-to-end tests of storage targets that are mounts (a job reading through FUSE, a
// loop device whose image lives on FUSE). Not part of stallwatch.
//
//   swslowfs SOURCE MOUNTPOINT --delay-file FILE [fuse options, e.g. -f]
//
// FILE holds a number of milliseconds that every read waits before it is served (0 or a
// missing file: none), or "MS EVERY": one read in EVERY waits (a tail that barely moves the
// mean); it is read again every 50 ms, so a test can open and close a slow window while a job
// runs. Files are opened with direct_io, so that every read of the job
// reaches the daemon rather than the page cache.
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace {

std::string g_source;
std::string g_delay_file;
std::atomic<int> g_delay_ms{0};
std::atomic<int> g_delay_every{1};  // one read in this many waits
std::atomic<uint64_t> g_reads{0};
std::atomic<bool> g_running{true};

std::string real(const char* path) { return g_source + path; }

void watchDelayFile() {
  while (g_running) {
    int ms = 0, every = 1;
    std::ifstream in(g_delay_file);
    if (in) in >> ms;
    if (in) in >> every;
    g_delay_every = every > 0 ? every : 1;
    g_delay_ms = ms > 0 ? ms : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Started here, not in main: fuse_main forks into the background after parsing, and a thread
// started before the fork would not exist in the daemon.
std::thread g_watcher;
void* slowInit(fuse_conn_info*, fuse_config*) {
  g_watcher = std::thread(watchDelayFile);
  return nullptr;
}

void slowDestroy(void*) {
  g_running = false;
  if (g_watcher.joinable()) g_watcher.join();
}

int slowGetattr(const char* path, struct stat* st, fuse_file_info*) {
  return ::lstat(real(path).c_str(), st) == 0 ? 0 : -errno;
}

int slowReaddir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
                fuse_readdir_flags) {
  DIR* dir = ::opendir(real(path).c_str());
  if (!dir) return -errno;
  while (dirent* e = ::readdir(dir)) fill(buf, e->d_name, nullptr, 0, fuse_fill_dir_flags{});
  ::closedir(dir);
  return 0;
}

int slowOpen(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  const int fd = ::open(real(path).c_str(), O_RDONLY);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  return 0;
}

int slowRead(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  const uint64_t nth = g_reads.fetch_add(1);
  if (const int ms = g_delay_ms.load();
      ms > 0 && nth % static_cast<uint64_t>(g_delay_every.load()) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  const ssize_t n = ::pread(static_cast<int>(fi->fh), buf, size, offset);
  return n < 0 ? -errno : static_cast<int>(n);
}

int slowRelease(const char*, fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Our own arguments first: SOURCE, then --delay-file FILE anywhere; the rest is FUSE's.
  std::string args_error;
  char** fuse_argv = new char*[static_cast<size_t>(argc) + 1];
  int fuse_argc = 0;
  fuse_argv[fuse_argc++] = argv[0];
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--delay-file") == 0 && i + 1 < argc) {
      g_delay_file = argv[++i];
    } else if (g_source.empty() && argv[i][0] != '-') {
      char resolved[PATH_MAX];
      if (!::realpath(argv[i], resolved)) {
        std::perror(argv[i]);
        return 2;
      }
      g_source = resolved;
    } else {
      fuse_argv[fuse_argc++] = argv[i];
    }
  }
  fuse_argv[fuse_argc] = nullptr;
  if (g_source.empty() || g_delay_file.empty()) {
    std::fprintf(stderr, "usage: %s SOURCE MOUNTPOINT --delay-file FILE [FUSE options]\n", argv[0]);
    return 2;
  }
  fuse_operations ops{};
  ops.getattr = slowGetattr;
  ops.readdir = slowReaddir;
  ops.open = slowOpen;
  ops.read = slowRead;
  ops.release = slowRelease;
  ops.init = slowInit;
  ops.destroy = slowDestroy;
  const int rc = fuse_main(fuse_argc, fuse_argv, &ops, nullptr);
  delete[] fuse_argv;
  return rc;
}
