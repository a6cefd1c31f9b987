// Helpers of the CUDA parity tests: device buffers, uploads that round to the GPU dtype (the CPU float64
// reference is then computed from the ROUNDED values), poisoned outputs, and the table every op prints:
// op, dtype, shape, worst ||out - ref|| / ||ref|| over the op's outputs, tolerance, pass/fail.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/cuda/device_memory.h"
#include "ops/cuda/poison.h"
#include "ops/kernel_options.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt::test {

// Sets the kernel option `key` (ops/kernel_options.h) of the tests' context (support/test_context.h) to
// `value` for its lifetime (nullptr: the option's default), then restores the options it held before.
class ScopedKernelOption {
 public:
  ScopedKernelOption(const char* key, const char* value) : saved_(test_context().kernels) {
    std::string text = value ? value : "";
    if (!value)
      for (const auto& [name, default_value] : ops::describe_kernel_options(ops::KernelOptions{}))
        if (name == key) text = default_value;
    ops::set_kernel_option(test_context().kernels, key, text, "test");
  }
  ~ScopedKernelOption() { test_context().kernels = saved_; }
  ScopedKernelOption(const ScopedKernelOption&) = delete;
  ScopedKernelOption& operator=(const ScopedKernelOption&) = delete;

 private:
  ops::KernelOptions saved_;
};

// The attention kernels (auto, cudnn, tc, simt; nullptr: auto) for its lifetime.
struct AttentionKernelChoice : ScopedKernelOption {
  explicit AttentionKernelChoice(const char* value) : ScopedKernelOption("attention", value) {}
};

// The RMSNorm kernel variants (rmsnorm_select.h) the parity and determinism tests run: the defaults (the
// register kernels, the pair backward), the backward's one block per row walk (single-pdl), the general
// kernels.
struct RmsNormVariant {
  const char* forward;   // the kernel option rmsnorm_forward (nullptr: the default)
  const char* backward;  // rmsnorm_backward
  const char* name;
};
inline constexpr RmsNormVariant kRmsNormVariants[] = {
    {nullptr, nullptr, ""}, {nullptr, "single-pdl", " [single-pdl]"}, {"general", "general", " [general]"}};

// A variant's kernel options for its lifetime.
struct RmsNormChoice {
  explicit RmsNormChoice(const RmsNormVariant& v)
      : forward("rmsnorm_forward", v.forward), backward("rmsnorm_backward", v.backward) {}
  ScopedKernelOption forward, backward;
};

inline bool gpu_present() {
  return ops::cuda::device_count() > 0;
}

#define LT_REQUIRE_GPU() \
  ASSERT_TRUE(::lt::test::gpu_present()) << "no GPU visible: test_cuda runs on the GPU machine"

// GPU.md's tolerances for CUDA vs the CPU float64 reference. GPU.md names none for fp16: its 10-bit mantissa
// (bf16 has 7) rounds 8x finer, so 5e-3 keeps the margin bf16's 1e-2 has while catching real errors.
inline double tolerance(DType dt) {
  return dt == DType::BF16 ? 1e-2 : dt == DType::F16 ? 5e-3 : 1e-5;
}

// A device tensor that owns its memory.
struct DeviceTensor {
  Tensor t;
  DeviceTensor() = default;
  DeviceTensor(DType dtype, std::initializer_list<int64_t> dims) {
    t = Tensor(nullptr, dtype, dims, Device::CUDA);
    size_t bytes = t.bytes() > 0 ? t.bytes() : 1;
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    t.data = p;
  }
  ~DeviceTensor() {
    if (t.data) cudaFree(t.data);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& o) noexcept : t(o.t) { o.t.data = nullptr; }
};

// `values` rounded to `dtype` in place (what the GPU will see) and uploaded.
inline DeviceTensor upload(std::vector<double>& values, DType dtype, std::initializer_list<int64_t> dims) {
  DeviceTensor d(dtype, dims);
  EXPECT_EQ(size_t(d.t.numel()), values.size());
  std::vector<char> bytes(values.size() * dtype_size(dtype) + 1);
  convert_elements(bytes.data(), dtype, values.data(), DType::F64, values.size());
  convert_elements(values.data(), DType::F64, bytes.data(), dtype, values.size());
  EXPECT_EQ(cudaMemcpy(d.t.data, bytes.data(), d.t.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

inline DeviceTensor upload_i32(const std::vector<int32_t>& values, std::initializer_list<int64_t> dims) {
  DeviceTensor d(DType::I32, dims);
  EXPECT_EQ(cudaMemcpy(d.t.data, values.data(), d.t.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

// A fresh output filled with NaN poison: an element the kernel forgets shows up as NaN.
inline DeviceTensor poisoned(DType dtype, std::initializer_list<int64_t> dims) {
  DeviceTensor d(dtype, dims);
  if (d.t.bytes() > 0) ops::cuda::poison_fill(d.t.data, d.t.bytes(), nullptr);
  return d;
}

inline std::vector<double> download(const DeviceTensor& d) {
  std::vector<char> bytes(d.t.bytes() + 1);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess)
      << "a kernel failed (run with LEANTUNE_CUDA_SYNC=1 to locate it)";
  EXPECT_EQ(cudaMemcpy(bytes.data(), d.t.data, d.t.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<double> out(size_t(d.t.numel()));
  convert_elements(out.data(), DType::F64, bytes.data(), d.t.dtype, out.size());
  return out;
}

// A host float64 tensor over `v` (the reference's inputs and outputs).
inline Tensor host(std::vector<double>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F64, dims);
}

// ||out - ref||_2 / ||ref||_2 (absolute when ref is zero); infinity on any NaN or size mismatch.
inline double rel_error(const std::vector<double>& out, const std::vector<double>& ref) {
  if (out.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) return INFINITY;
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The worst error over an op's outputs, and which output it was.
struct Worst {
  double error = 0;
  std::string output = "-";
  void add(const std::string& name, const std::vector<double>& out, const std::vector<double>& ref) {
    const double e = rel_error(out, ref);
    if (!(e <= error)) {
      error = e;
      output = name;
    }
  }
};

// Prints one table row and fails the test when the error is over tolerance (or NaN).
inline void report(const std::string& op, DType dtype, const std::string& shape, const Worst& w, double tol) {
  const bool pass = w.error <= tol;
  std::printf("PARITY  %-24s %-5s %-24s %-8s err %10.3e  tol %8.1e  %s\n", op.c_str(),
              std::string(dtype_name(dtype)).c_str(), shape.c_str(), w.output.c_str(), w.error, tol,
              pass ? "pass" : "FAIL");
  std::fflush(stdout);
  EXPECT_TRUE(pass) << op << " " << dtype_name(dtype) << " " << shape << ": output " << w.output
                    << " has relative error " << w.error << " > " << tol << " (inf = NaN or size mismatch)";
}

inline std::vector<int32_t> random_ints(size_t count, uint64_t seed, int32_t lo, int32_t hi_exclusive) {
  std::vector<double> u = random_values(count, seed, 0.0, 1.0);
  std::vector<int32_t> out(count);
  for (size_t i = 0; i < count; ++i) {
    int32_t v = lo + int32_t(u[i] * double(hi_exclusive - lo));
    out[i] = v < hi_exclusive ? v : hi_exclusive - 1;
  }
  return out;
}

// Median of `reps` timings of fn in milliseconds (CUDA events, after 3 warm-up runs): the timing benches.
template <class Fn>
float median_ms(int reps, Fn&& fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace lt::test
