// Device arenas: one block reserved up front, handed out as named allocations with stack discipline
// (mark / release). The high-water mark is what the memory plan is checked against; nothing in the
// step loop calls the system allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace lt {

// Where an arena's block comes from: host memory here, cudaMalloc in ops/cuda (core includes no CUDA).
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  virtual void* allocate(size_t bytes) = 0;  // throws OutOfMemory with the numbers
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual Device device() const = 0;
};

// The CPU engine's memory (its "device" memory too): it counts the bytes its blocks hold now and at most
// since reset_peak(), so a test can see what a run holds at its highest (a whole model gathered where only
// slices should be, say).
class HostMemory final : public MemoryResource {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::CPU; }
  static HostMemory& instance();
  size_t in_use_bytes() const { return in_use_.load(); }
  size_t peak_bytes() const { return peak_.load(); }
  void reset_peak() { peak_.store(in_use_.load()); }

 private:
  std::atomic<size_t> in_use_{0}, peak_{0};  // the bytes asked for (deallocate is given the same)
};

struct ArenaAllocation {
  std::string name;
  size_t offset;
  size_t bytes;
};

class Arena {
 public:
  struct Mark {
    size_t offset;
    size_t count;
  };

  Arena(std::string name, MemoryResource& memory, size_t capacity_bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A tensor of `dtype` and `dims` named `name` (the name shows in plans and out-of-memory messages).
  Tensor alloc(std::string_view name, DType dtype, std::initializer_list<int64_t> dims);
  void* alloc_bytes(std::string_view name, size_t bytes, size_t alignment = 256);

  Mark mark() const { return {used_, allocations_.size()}; }
  void release(Mark mark);  // frees everything allocated after `mark`
  void reset() { release({0, 0}); }

  const std::string& name() const { return name_; }
  Device device() const { return memory_.device(); }
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  size_t high_water() const { return high_water_; }
  void reset_high_water() { high_water_ = used_; }
  const std::vector<ArenaAllocation>& allocations() const { return allocations_; }

 private:
  std::string name_;
  MemoryResource& memory_;
  size_t capacity_;
  char* base_ = nullptr;
  size_t used_ = 0;
  size_t high_water_ = 0;
  std::vector<ArenaAllocation> allocations_;
};

std::string format_bytes(double bytes);  // "1.50 GiB", "12.0 MiB", "512 B"
// The machine's physical memory (sysconf), 0 when the system does not say.
size_t physical_host_memory_bytes();

}  // namespace lt
