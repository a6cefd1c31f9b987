// Opening a user's input file: only regular files are read (a FIFO or a device named model.safetensors would
// block or never end), and a whole-file read is bounded so that a huge file is refused before it is held.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lt {

// Throws lt::Error naming `path` unless it is an existing regular file (symlinks to one are fine).
void require_regular_file(const std::string& path);

// A read-only descriptor of the regular file `path`: stat before open (a FIFO is never opened), O_NONBLOCK on
// open and fstat after (the file cannot be swapped for a FIFO in between). Throws lt::Error naming `path`.
// The caller closes it.
int open_input_file(const std::string& path);

// The same file as a stdio stream (fclose by the caller).
std::FILE* open_input_stream(const std::string& path);

// The whole file, refused naming `path`, `what` and both sizes when it is larger than `max_bytes`.
std::string read_input_file(const std::string& path, uint64_t max_bytes, const char* what = "file");

// Reads lines (without the '\n') of a stream while holding at most `max_line_bytes` of one: a longer line is
// skipped to its end and reported as too long, so one huge record never costs more than the bound.
class BoundedLineReader {
 public:
  BoundedLineReader(std::FILE* in, uint64_t max_line_bytes) : in_(in), max_(max_line_bytes) {}
  // false at end of file; otherwise `line` holds the line, or is empty with too_long() true.
  bool next(std::string& line);
  bool too_long() const { return too_long_; }
  uint64_t length() const { return length_; }  // bytes of the last line, counted even when too long

 private:
  std::FILE* in_;
  uint64_t max_;
  bool too_long_ = false;
  uint64_t length_ = 0;
};

}  // namespace lt
