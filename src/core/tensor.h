// A non-owning view of a dense, row-major tensor: pointer, dtype, shape and device. Ownership lives in
// arenas (core/arena.h) or in the objects that made the memory; views are cheap to copy and pass by value.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"

namespace lt {

// Auto is a configuration's request only ("cuda when usable, else cpu"): resolved before any tensor exists.
enum class Device : uint8_t { CPU, CUDA, Auto };
std::string_view device_name(Device device);

struct Tensor {
  static constexpr int kMaxDims = 6;

  void* data = nullptr;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> dims, Device device = Device::CPU);

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[size_t(i < 0 ? i + ndim : i)]; }
  std::string shape_string() const;  // "(2, 16, 64)"

  // Typed pointer; throws if the dtype does not match T (names `what` in the message).
  template <class T>
  T* ptr(std::string_view what = "tensor") const {
    LT_CHECK(dtype == dtype_of<T>::value, "{}: dtype is {}, expected {}", what, dtype_name(dtype),
             dtype_name(dtype_of<T>::value));
    return static_cast<T*>(data);
  }

  // The same memory seen with another shape of the same element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const;
  // Rows [begin, end) of the leading dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;
};

// Throws "<what>: shape (a, b) expected (c, d)" unless the shape matches; -1 in `expected` matches any.
void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, std::string_view what);
void check_dtype(const Tensor& t, DType expected, std::string_view what);
void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view what);

}  // namespace lt
