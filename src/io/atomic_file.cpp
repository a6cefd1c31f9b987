#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/output_dir.h"

namespace lt::io {

namespace fs = std::filesystem;

std::string unique_name_suffix() {
  static std::atomic<uint64_t> counter{0};
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t mix = uint64_t(now.tv_nsec) ^ (uint64_t(now.tv_sec) << 30) ^ (uint64_t(::getpid()) << 16) ^
                 (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull);
  return fmt::format("{:06x}", mix & 0xffffffull);
}

namespace {

std::string parent_of(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  LT_CHECK(fd >= 0, "cannot open {} to sync it: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  LT_CHECK(rc == 0, "cannot sync {}: {}", path, std::strerror(err));
}

}  // namespace

void fsync_directory(const std::string& dir) {
  fsync_path(dir, true);
}

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  refuse_symlink(path_, "writing");
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp-" + unique_name_suffix();
    // 0666 so the umask decides the final permissions, as for any new file.
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    LT_CHECK(fd_ >= 0 || errno == EEXIST, "cannot create {} (to write {}): {}", temp_path_, path_,
             std::strerror(errno));
  }
  LT_CHECK(fd_ >= 0, "cannot create a temporary file next to {}: every name tried exists", path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t size) {
  LT_CHECK(fd_ >= 0 && !committed_, "{}: write after commit", path_);
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    LT_CHECK(n > 0, "cannot write {}: {}", temp_path_, n < 0 ? std::strerror(errno) : "no progress");
    p += n;
    size -= size_t(n);
  }
}

void AtomicFileWriter::commit() {
  LT_CHECK(fd_ >= 0 && !committed_, "{}: commit called twice", path_);
  LT_CHECK(::fsync(fd_) == 0, "cannot sync {}: {}", temp_path_, std::strerror(errno));
  int rc = ::close(fd_);
  fd_ = -1;
  LT_CHECK(rc == 0, "cannot close {}: {}", temp_path_, std::strerror(errno));
  LT_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "cannot rename {} to {}: {}", temp_path_, path_,
           std::strerror(errno));
  committed_ = true;
  fsync_directory(parent_of(path_));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes.data(), bytes.size());
  writer.commit();
}

AtomicDirectory::AtomicDirectory(std::string final_path) : final_path_(std::move(final_path)) {
  while (final_path_.size() > 1 && final_path_.back() == '/') final_path_.pop_back();
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string candidate = final_path_ + ".tmp-" + unique_name_suffix();
    if (::mkdir(candidate.c_str(), 0777) == 0) {
      temp_path_ = candidate;
      write_owner_marker(temp_path_);
      return;
    }
    LT_CHECK(errno == EEXIST, "cannot create directory {} (to write {}): {}", candidate, final_path_,
             std::strerror(errno));
  }
  LT_FAIL("cannot create a temporary directory next to {}: every name tried exists", final_path_);
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_ || temp_path_.empty()) return;
  std::error_code ec;
  fs::remove_all(temp_path_, ec);
}

void AtomicDirectory::commit() {
  LT_CHECK(!committed_, "{}: commit called twice", final_path_);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(temp_path_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) fsync_path(it->path().string(), false);
    if (it->is_directory()) fsync_path(it->path().string(), true);
  }
  LT_CHECK(!ec, "cannot list {}: {}", temp_path_, ec.message());
  fsync_directory(temp_path_);

  std::string old_path;
  if (fs::exists(fs::symlink_status(final_path_))) {
    refuse_symlink(final_path_, "replacing a directory");
    LT_CHECK(has_owner_marker(final_path_),
             "{} exists and leantune did not write it (no {} marker in it); leantune replaces only its own "
             "directories: move it away or choose another output directory",
             final_path_, kOwnerMarker);
    old_path = final_path_ + ".old-" + unique_name_suffix();
    LT_CHECK(::rename(final_path_.c_str(), old_path.c_str()) == 0, "cannot move the previous {} aside: {}",
             final_path_, std::strerror(errno));
  }
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
    int err = errno;
    if (!old_path.empty()) ::rename(old_path.c_str(), final_path_.c_str());  // put the previous one back
    LT_FAIL("cannot rename {} to {}: {}", temp_path_, final_path_, std::strerror(err));
  }
  committed_ = true;
  fsync_directory(parent_of(final_path_));
  if (!old_path.empty()) fs::remove_all(old_path, ec);
}

}  // namespace lt::io
