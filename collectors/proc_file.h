// Reads a small kernel file (procfs, sysfs) again and again at low cost: for pseudo-files the
// descriptor stays open and each read starts at offset 0 with pread, as seq_file allows. Kernel
// pseudo-files are served from memory, so these reads never wait on a disk.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace stallwatch::collectors {

class ProcFile {
 public:
  // A file the kernel writes in one go (single_open: /proc/PID/stat, io, schedstat): a read
  // shorter than the buffer is all of it, and the read that would find the end is saved. A
  // multi-record seq_file (diskstats, mountinfo) may return short before its end.
  enum class Shape { kRecords, kOneRecord };
  explicit ProcFile(std::filesystem::path path, Shape shape = Shape::kRecords);
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;
  ProcFile(ProcFile&& other) noexcept;
  ProcFile& operator=(ProcFile&& other) noexcept;

  // The whole content, or an error text naming the path and errno. The returned view stays
  // valid until the next call.
  bool read(std::string& out, std::string& error);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool keep_open_ = false;
  bool seekable_ = true;
  Shape shape_ = Shape::kRecords;
};

// One-shot read of a small text file; nullopt if it is missing or unreadable.
std::optional<std::string> readTextFile(const std::filesystem::path& path);
// NAME in the directory open as DIR, read relative to it (no path walked from the root: a walk
// of a tree's directories, issue 47), at most 1 MiB; nullopt if missing or unreadable.
std::optional<std::string> readTextFileAt(int dir, const char* name);
// The same with the trailing newline and spaces removed (sysfs attributes).
std::optional<std::string> readAttribute(const std::filesystem::path& path);

}  // namespace stallwatch::collectors
