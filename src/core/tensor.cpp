#include "core/tensor.h"

#include <fmt/format.h>

namespace lt {

std::string_view device_name(Device device) {
  return device == Device::CPU ? "cpu" : device == Device::CUDA ? "cuda" : "auto";
}

Tensor::Tensor(void* data_, DType dtype_, std::initializer_list<int64_t> dims, Device device_)
    : data(data_), dtype(dtype_), device(device_), ndim(int(dims.size())) {
  LT_CHECK(dims.size() <= size_t(kMaxDims), "tensor with {} dimensions; at most {} are supported", dims.size(),
           kMaxDims);
  int i = 0;
  for (int64_t d : dims) {
    LT_CHECK(d >= 0, "tensor dimension {} is negative ({})", i, d);
    shape[size_t(i++)] = d;
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[size_t(i)];
  return n;
}

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", shape[size_t(i)]);
  return s + ")";
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> dims) const {
  Tensor t(data, dtype, dims, device);
  LT_CHECK(t.numel() == numel(), "reshape {} -> {} changes the element count", shape_string(), t.shape_string());
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  LT_CHECK(ndim >= 1 && 0 <= begin && begin <= end && end <= shape[0], "slice_rows [{}, {}) of shape {}", begin,
           end, shape_string());
  Tensor t = *this;
  int64_t row = shape[0] ? numel() / shape[0] : 0;
  t.data = static_cast<char*>(data) + size_t(begin * row) * dtype_size(dtype);
  t.shape[0] = end - begin;
  return t;
}

void check_shape(const Tensor& t, std::initializer_list<int64_t> expected, std::string_view what) {
  bool ok = t.ndim == int(expected.size());
  int i = 0;
  for (int64_t e : expected) {
    if (ok && e >= 0 && t.shape[size_t(i)] != e) ok = false;
    ++i;
  }
  if (!ok) {
    std::string want = "(";
    i = 0;
    for (int64_t e : expected) want += fmt::format("{}{}", i++ ? ", " : "", e < 0 ? std::string("*") : std::to_string(e));
    LT_FAIL("{}: shape {} expected {})", what, t.shape_string(), want);
  }
}

void check_dtype(const Tensor& t, DType expected, std::string_view what) {
  LT_CHECK(t.dtype == expected, "{}: dtype {} expected {}", what, dtype_name(t.dtype), dtype_name(expected));
}

void check_same_dtype(const Tensor& a, const Tensor& b, std::string_view what) {
  LT_CHECK(a.dtype == b.dtype, "{}: dtypes differ ({} vs {})", what, dtype_name(a.dtype), dtype_name(b.dtype));
}

}  // namespace lt
