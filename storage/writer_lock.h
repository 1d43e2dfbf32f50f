// One recorder per database: two agents writing the same file side by side (the systemd
// service and an ad-hoc `stallwatch record`, both on the default path as root) interleave
// their samples and every verdict read from it is wrong. The recorder holds an exclusive
// flock on DB.lock, a sidecar holding its PID, for as long as it runs; a second one is
// refused with the first one's PID. A sidecar, not the DB itself: closing any descriptor of
// the DB file would drop SQLite's own POSIX locks on it.
#pragma once

#include <filesystem>

namespace stallwatch::storage {

class WriterLock {
 public:
  // Takes the lock or throws StoreError naming the holder ("... is being written by
  // stallwatch record, pid 1234; stop it, or record to another --db").
  explicit WriterLock(const std::filesystem::path& db_path);
  ~WriterLock();
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace stallwatch::storage
