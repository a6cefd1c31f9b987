// Shared test helpers: where ../shared lives, random tensors, finite-difference gradient checks.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace lt::test {

// Path of `relative` under the shared data folder (LEANTUNE_SHARED, else <source>/../shared). When the file
// is missing the test FAILS if the CI variable is set, and is skipped otherwise; use with ASSERT_NO_FATAL_FAILURE
// or check the returned string (empty means skipped/failed).
std::string shared_path(const std::string& relative);
#define LT_REQUIRE_SHARED(var, relative)                 \
  std::string var = ::lt::test::shared_path(relative);   \
  if (var.empty()) return

// The project's source directory (for golden files under tests/).
std::string source_path(const std::string& relative);

// A fresh temporary directory for one test, removed by the caller's TempDir destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Uniform values in [lo, hi) from a seeded Philox stream (never zeros-only inputs).
std::vector<double> random_values(size_t count, uint64_t seed, double lo = -1.0, double hi = 1.0);

// max_i |a_i - b_i| / max(|b|_inf, tiny) and friends, for comparing gradients.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b);
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b);  // normwise: |a-b|_inf/|b|_inf

// Central finite differences of a scalar function f over every element of `x` (modified in place and
// restored): grad[i] = (f(x + h e_i) - f(x - h e_i)) / 2h.
std::vector<double> finite_difference_gradient(std::vector<double>& x, const std::function<double()>& f,
                                               double h = 1e-6);

// Runs `body`, expects an lt::Error whose message contains every one of `parts`.
inline void expect_error_mentions(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "expected an lt::Error mentioning " << ::testing::PrintToString(parts);
  } catch (const Error& e) {
    std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nmissing: " << part;
  }
}

// A host tensor's elements as doubles (any floating dtype), for comparisons against references.
inline std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  convert_elements(v.data(), DType::F64, t.data, t.dtype, v.size());
  return v;
}

// A host tensor's raw bytes: what bit-for-bit comparisons compare.
inline std::vector<char> bytes_of(const Tensor& t) {
  const char* p = static_cast<const char*>(t.data);
  return std::vector<char>(p, p + t.bytes());
}

}  // namespace lt::test
