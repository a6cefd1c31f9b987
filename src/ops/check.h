// Argument checks shared by the public op functions in ops/<op>.cpp, so that the CPU and CUDA versions of
// an op refuse exactly the same calls with the same messages.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "core/tensor.h"

namespace lt::ops {

// A size taken from an op's params; negative sizes would otherwise act as check_shape's wildcard.
inline void check_size(int64_t value, int64_t minimum, std::string_view op, std::string_view field) {
  LT_CHECK(value >= minimum, "{}: params.{} is {}, expected at least {}", op, field, value, minimum);
}

// A required tensor: present (non-empty) and of exactly `dims` (all sizes >= 0).
inline void check_tensor(const Tensor& t, std::initializer_list<int64_t> dims, std::string_view what) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  LT_CHECK(!t.empty() || count == 0, "{}: the tensor is missing (empty view)", what);
  check_shape(t, dims, what);
}

// An optional tensor: empty means "not wanted"; otherwise as check_tensor.
inline void check_optional(const Tensor& t, std::initializer_list<int64_t> dims, std::string_view what) {
  if (!t.empty()) check_tensor(t, dims, what);
}

// Two tensors of one shape (elementwise ops whose shape is not in params).
inline void check_same_shape(const Tensor& t, const Tensor& like, std::string_view what) {
  bool same = t.ndim == like.ndim;
  for (int i = 0; same && i < t.ndim; ++i) same = t.shape[size_t(i)] == like.shape[size_t(i)];
  LT_CHECK(same, "{}: shape {} expected {}", what, t.shape_string(), like.shape_string());
}

}  // namespace lt::ops
