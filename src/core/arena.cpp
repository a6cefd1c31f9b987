#include "core/arena.h"

#include <unistd.h>

#include <cstdlib>

namespace lt {

void* HostMemory::allocate(size_t bytes) {
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded ? rounded : 4096);
  if (!p)
    throw OutOfMemory(fmt::format("host allocation of {} failed", format_bytes(double(bytes))), __FILE__,
                      __LINE__);
  const size_t now = in_use_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void HostMemory::deallocate(void* ptr, size_t bytes) {
  std::free(ptr);
  in_use_.fetch_sub(bytes);
}

size_t physical_host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
}

HostMemory& HostMemory::instance() {
  static HostMemory memory;
  return memory;
}

Arena::Arena(std::string name, MemoryResource& memory, size_t capacity_bytes)
    : name_(std::move(name)), memory_(memory), capacity_(capacity_bytes) {
  if (capacity_ > 0) base_ = static_cast<char*>(memory_.allocate(capacity_));
}

Arena::~Arena() {
  if (base_) memory_.deallocate(base_, capacity_);
}

void* Arena::alloc_bytes(std::string_view name, size_t bytes, size_t alignment) {
  size_t offset = (used_ + alignment - 1) / alignment * alignment;
  if (offset + bytes > capacity_) {
    throw OutOfMemory(fmt::format("arena '{}' ({}): allocation '{}' of {} does not fit ({} in use of {})",
                                  name_, device_name(device()), name, format_bytes(double(bytes)),
                                  format_bytes(double(used_)), format_bytes(double(capacity_))),
                      __FILE__, __LINE__);
  }
  allocations_.push_back({std::string(name), offset, bytes});
  used_ = offset + bytes;
  if (used_ > high_water_) high_water_ = used_;
  return base_ + offset;
}

Tensor Arena::alloc(std::string_view name, DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims, device());
  t.data = alloc_bytes(name, t.bytes());
  return t;
}

void Arena::release(Mark mark) {
  LT_CHECK(mark.count <= allocations_.size() && mark.offset <= used_, "arena '{}': release past a later mark",
           name_);
  allocations_.resize(mark.count);
  used_ = mark.offset;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

}  // namespace lt
