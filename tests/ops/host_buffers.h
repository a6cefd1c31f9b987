// Owning host buffers for the op tests: a Tensor view over storage filled from doubles, or poisoned so
// that an output element the op forgets to write shows up as NaN (or -1 for integers).
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "support/test_support.h"

namespace lt::test {

class HostTensor {
 public:
  HostTensor() = default;
  // Poisoned: every byte 0xFF (NaN in every floating dtype, -1 in integer ones).
  HostTensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    numel_ = n;
    storage_.assign((size_t(n) * dtype_size(dtype) + 7) / 8, ~uint64_t(0));
  }
  static HostTensor of(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
    HostTensor t(dtype, std::move(dims));
    t.set(values);
    return t;
  }
  static HostTensor ints(std::vector<int64_t> dims, const std::vector<int32_t>& values) {
    HostTensor t(DType::I32, std::move(dims));
    EXPECT_EQ(size_t(t.numel_), values.size());
    std::memcpy(t.storage_.data(), values.data(), values.size() * sizeof(int32_t));
    return t;
  }

  Tensor view() const {
    Tensor t;
    t.data = const_cast<uint64_t*>(storage_.data());
    t.dtype = dtype_;
    t.ndim = int(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) t.shape[i] = dims_[i];
    return t;
  }
  operator Tensor() const { return view(); }  // NOLINT: pass buffers straight to the ops

  int64_t numel() const { return numel_; }
  void set(const std::vector<double>& values) {
    EXPECT_EQ(size_t(numel_), values.size());
    convert_elements(storage_.data(), dtype_, values.data(), DType::F64, values.size());
  }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel_));
    convert_elements(v.data(), DType::F64, storage_.data(), dtype_, v.size());
    return v;
  }
  void poison() { std::fill(storage_.begin(), storage_.end(), ~uint64_t(0)); }

 private:
  DType dtype_ = DType::F64;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::vector<uint64_t> storage_;  // 8-byte aligned for every dtype
};

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  long double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (long double)a[i] * b[i];
  return double(s);
}

// The values as float would store them: inputs of a float-vs-double comparison.
inline std::vector<double> rounded_to_float(std::vector<double> v) {
  for (double& x : v) x = double(float(x));
  return v;
}

inline std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// A section of tests/ops/golden/ops_transformers.json (tools/make_ops_golden.py writes it).
inline nlohmann::json transformers_golden(const std::string& section) {
  const std::string path = source_path("tests/ops/golden/ops_transformers.json");
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "missing " << path << " (tools/make_ops_golden.py writes it)";
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in).at(section);
}

inline std::vector<double> doubles(const nlohmann::json& j) {
  return j.get<std::vector<double>>();
}

// Runs fn and expects an lt::Error whose message contains `needle`.
template <class Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// Runs fn with an OpenMP team of `threads`, restoring the previous setting: the CPU ops must give the
// same bits whatever the thread count.
template <class Fn>
void with_threads(int threads, Fn&& fn) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  fn();
  omp_set_num_threads(saved);
}

}  // namespace lt::test
