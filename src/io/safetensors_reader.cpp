// SafetensorsFile: maps the file read-only and validates it whole before handing out entries. Entry data
// points into the mapping and may be unaligned (the format does not promise alignment).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/input_file.h"
#include "io/safetensors.h"
#include "io/safetensors_header.h"

namespace lt::io {

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Closes the descriptor on every path out of open().
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  FileDescriptor file;
  file.fd = open_input_file(path);  // a FIFO or device is refused before open() could block on it
  struct stat st {};
  LT_CHECK(::fstat(file.fd, &st) == 0, "safetensors {}: cannot stat: {}", path, std::strerror(errno));
  LT_CHECK(S_ISREG(st.st_mode), "safetensors {}: not a regular file", path);
  uint64_t size = uint64_t(st.st_size);
  LT_CHECK(size >= 8, "safetensors {}: file has {} bytes, too short for the 8-byte header length", path,
           size);

  std::unique_ptr<SafetensorsFile> result(new SafetensorsFile());
  result->path_ = path;
  void* mapping = ::mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, file.fd, 0);
  LT_CHECK(mapping != MAP_FAILED, "safetensors {}: cannot map {} bytes: {}", path, size,
           std::strerror(errno));
  result->mapping_ = mapping;  // owned from here: the destructor unmaps even if validation throws
  result->mapping_size_ = size_t(size);

  const auto* bytes = static_cast<const uint8_t*>(mapping);
  SafetensorsHeader header = parse_safetensors_header(path, bytes, size);
  const uint8_t* data = bytes + 8 + header.header_size;
  result->entries_ = std::move(header.entries);
  result->metadata_ = std::move(header.metadata);
  for (size_t i = 0; i < result->entries_.size(); ++i) {
    SafetensorsEntry& entry = result->entries_[i];
    entry.data = data + entry.begin;
    result->index_[entry.name] = i;
  }
  return result;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, mapping_size_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

}  // namespace lt::io
