#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/arena.h"
#include "core/error.h"

namespace lt {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

void require_regular_file(const std::string& path) {
  struct stat st {};
  LT_CHECK(::stat(path.c_str(), &st) == 0, "{}: cannot open: {}", path, std::strerror(errno));
  LT_CHECK(S_ISREG(st.st_mode), "{}: is {}, not a regular file", path, kind_of(st.st_mode));
}

int open_input_file(const std::string& path) {
  require_regular_file(path);
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  LT_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    LT_FAIL("{}: is {}, not a regular file", path, kind_of(st.st_mode));
  }
  // Regular files ignore O_NONBLOCK; cleared anyway so reads behave as plain blocking reads.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

std::FILE* open_input_stream(const std::string& path) {
  int fd = open_input_file(path);
  std::FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    ::close(fd);
    LT_FAIL("{}: cannot open: {}", path, std::strerror(errno));
  }
  return f;
}

std::string read_input_file(const std::string& path, uint64_t max_bytes, const char* what) {
  int fd = open_input_file(path);
  struct stat st {};
  ::fstat(fd, &st);
  if (uint64_t(st.st_size) > max_bytes) {
    ::close(fd);
    LT_FAIL("{}: {} of {} is larger than the {} leantune reads", path, what, format_bytes(double(st.st_size)),
            format_bytes(double(max_bytes)));
  }
  std::string text;
  text.reserve(size_t(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      LT_FAIL("{}: read error: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    if (text.size() + size_t(n) > max_bytes) {  // the file grew while read
      ::close(fd);
      LT_FAIL("{}: {} is larger than the {} leantune reads", path, what, format_bytes(double(max_bytes)));
    }
    text.append(buffer, size_t(n));
  }
  ::close(fd);
  return text;
}

bool BoundedLineReader::next(std::string& line) {
  line.clear();
  too_long_ = false;
  length_ = 0;
  int c = 0;
  bool any = false;
  while ((c = getc_unlocked(in_)) != EOF) {
    any = true;
    if (c == '\n') break;
    ++length_;
    if (too_long_) continue;
    if (length_ > max_) {
      too_long_ = true;
      std::string().swap(line);  // give the memory back
      continue;
    }
    line.push_back(char(c));
  }
  return any;
}

}  // namespace lt
