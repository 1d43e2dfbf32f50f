#include "storage/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "storage/store.h"

namespace stallwatch::storage {

WriterLock::WriterLock(const std::filesystem::path& db_path) : path_(db_path.string() + ".lock") {
  std::error_code ec;
  if (const auto parent = path_.parent_path(); !parent.empty())
    std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0)
    throw StoreError("cannot open the lock file " + path_.string() + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw StoreError("cannot lock " + path_.string() + ": " + std::strerror(err));
    std::string holder(pid, n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw StoreError(db_path.string() + " is being written by another stallwatch record" +
                     (holder.empty() ? std::string() : ", pid " + holder) +
                     "; stop it, or record to another --db");
  }
  const std::string mine = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, mine.data(), mine.size(), 0) != static_cast<ssize_t>(mine.size())) {
    // The lock holds without the PID; a second recorder is still refused, only less helpfully.
  }
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);  // the lock goes with it; the file stays for the next one
}

}  // namespace stallwatch::storage
