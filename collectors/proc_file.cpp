#include "collectors/proc_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace stallwatch::collectors {
namespace {

constexpr size_t kReadChunkBytes = 16 * 1024;
// Kernel text files are small; refuse to grow without bound on something that is not.
constexpr size_t kMaxFileBytes = 16 * 1024 * 1024;

std::string errnoText(const std::filesystem::path& path, const char* what) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(errno);
}

}  // namespace

ProcFile::ProcFile(std::filesystem::path path, Shape shape)
    : path_(std::move(path)), shape_(shape) {}

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

ProcFile::ProcFile(ProcFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      keep_open_(other.keep_open_),
      seekable_(other.seekable_),
      shape_(other.shape_) {}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    keep_open_ = other.keep_open_;
    seekable_ = other.seekable_;
    shape_ = other.shape_;
  }
  return *this;
}

bool ProcFile::read(std::string& out, std::string& error) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) {
      fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        error = errnoText(path_, "cannot open");
        return false;
      }
      struct statfs fs {};
      keep_open_ =
          ::fstatfs(fd_, &fs) == 0 && (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC ||
                                       fs.f_type == CGROUP2_SUPER_MAGIC);
      // Some pseudo-files cannot seek (fusectl's): read them in sequence, once per open.
      seekable_ = ::lseek(fd_, 0, SEEK_CUR) >= 0;
      keep_open_ = keep_open_ && seekable_;
    }
    out.clear();
    off_t offset = 0;
    bool failed = false;
    // Read into the stack and append what came: growing OUT by a chunk before each read would
    // zero-fill 16 KiB for a 300-byte stat (5 % of the jobs collector's time, issue 18).
    char chunk[kReadChunkBytes];
    while (true) {
      const ssize_t n = seekable_ ? ::pread(fd_, chunk, kReadChunkBytes, offset)
                                  : ::read(fd_, chunk, kReadChunkBytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        failed = true;
        break;
      }
      out.append(chunk, static_cast<size_t>(n));
      if (n == 0) break;
      if (shape_ == Shape::kOneRecord && keep_open_ && static_cast<size_t>(n) < kReadChunkBytes)
        break;
      offset += n;
      if (out.size() > kMaxFileBytes) {
        error = path_.string() + " is larger than " + std::to_string(kMaxFileBytes) + " bytes";
        return false;
      }
    }
    if (!failed) {
      // Only kernel pseudo-files regenerate on pread from 0; a regular file (a fixture tree,
      // a replay) may be replaced by rename, so it is opened afresh each time.
      if (!keep_open_) {
        ::close(fd_);
        fd_ = -1;
      }
      return true;
    }
    // The file may have been replaced (device removed, fixture rewritten): reopen once.
    error = errnoText(path_, "cannot read");
    ::close(fd_);
    fd_ = -1;
  }
  return false;
}

std::optional<std::string> readTextFile(const std::filesystem::path& path) {
  ProcFile file(path);
  std::string content;
  std::string error;
  if (!file.read(content, error)) return std::nullopt;
  return content;
}

std::optional<std::string> readTextFileAt(int dir, const char* name) {
  const int fd = ::openat(dir, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char chunk[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, chunk, sizeof chunk)) > 0 && text.size() < (1u << 20))
    text.append(chunk, static_cast<size_t>(n));
  ::close(fd);
  return n < 0 ? std::nullopt : std::optional(std::move(text));
}

std::optional<std::string> readAttribute(const std::filesystem::path& path) {
  auto text = readTextFile(path);
  if (!text) return std::nullopt;
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ' || text->back() == '\0')) {
    text->pop_back();
  }
  return text;
}

}  // namespace stallwatch::collectors
