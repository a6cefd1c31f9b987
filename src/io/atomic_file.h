// Writing files and directories so that a crash leaves either the old version or the complete new one,
// never a torn file: write a temporary sibling, fsync it, rename it over the target, fsync the parent.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lt::io {

// Streams bytes into `<path>.tmp-XXXXXX` (same directory, so the rename stays on one filesystem). A path
// that is a symbolic link is refused: the rename would replace the link, and leantune never writes through
// one.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  // removes the temporary file unless commit() succeeded
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  void commit();  // fsync, close, rename onto path(), fsync the directory
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

void write_file_atomic(const std::string& path, std::string_view bytes);

// Six hex digits unlikely to repeat between processes and threads (temporary names; O_EXCL / mkdir settle
// real collisions).
std::string unique_name_suffix();

// fsync of a directory, so that a rename inside it is durable.
void fsync_directory(const std::string& dir);

// A directory built in `<final>.tmp-XXXXXX` (for checkpoints): the caller writes files under path(), then
// commit() fsyncs every file and renames the directory to its final name. The directory carries leantune's
// owner marker from its creation (io/output_dir.h), so a stale one is recognised and a committed one may be
// replaced or rotated later. A previous directory of that name is moved aside first and removed once the
// new one is in place, but only when leantune made it (marker); anything else there is refused.
class AtomicDirectory {
 public:
  explicit AtomicDirectory(std::string final_path);
  ~AtomicDirectory();  // removes the temporary directory unless commit() succeeded
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  const std::string& path() const { return temp_path_; }  // where to write now
  std::string file(const std::string& name) const { return temp_path_ + "/" + name; }
  const std::string& final_path() const { return final_path_; }
  void commit();

 private:
  std::string final_path_, temp_path_;
  bool committed_ = false;
};

}  // namespace lt::io
