// ops::init_normal on the GPU against the CPU reference: the same Philox draws, so every value is the CPU's
// or (where the GPU's f64 log/cos round differently from glibc's) one f32 ulp from it, and such values are
// rare (ops.h: about one in 10^8; asserted at most one in 10^6).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "model/tiny_model.h"
#include "model/weights.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "parity_support.h"

namespace lt::test {
namespace {

TEST(CudaInitNormal, EqualsTheCpuDrawsWithinOneUlpAndAlmostAlwaysExactly) {
  LT_REQUIRE_GPU();
  const int64_t n = int64_t(1) << 24;
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<char> cpu(size_t(n) * dtype_size(dt)), gpu(cpu.size());
    ops::init_normal(Tensor(cpu.data(), dt, {n}), 3, 17, 0.02);
    DeviceTensor d(dt, {n});
    ops::init_normal(d.t, 3, 17, 0.02);
    ops::copy(Tensor(gpu.data(), dt, {n}), d.t);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    convert_elements(a.data(), DType::F32, cpu.data(), dt, size_t(n));
    convert_elements(b.data(), DType::F32, gpu.data(), dt, size_t(n));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (a[size_t(i)] == b[size_t(i)]) continue;
      ++differ;
      const float up = std::nextafter(a[size_t(i)], INFINITY), down = std::nextafter(a[size_t(i)], -INFINITY);
      if (dt == DType::F32)
        ASSERT_TRUE(b[size_t(i)] == up || b[size_t(i)] == down)
            << i << ": " << a[size_t(i)] << " vs " << b[size_t(i)];
      else
        ASSERT_NEAR(b[size_t(i)], a[size_t(i)], std::fabs(a[size_t(i)]) / 128) << i;
    }
    EXPECT_LE(differ, n / 1000000) << differ << " of " << n << " values differ";
  }
}

// A GPU run's random init draws the weights on the device (train/run_setup.cpp): every tensor, the constant
// norms and biases included, equals the host's draw but for init_normal's rare one-ulp values.
TEST(CudaInitNormal, RandomModelOnTheDeviceEqualsTheHostDraw) {
  LT_REQUIRE_GPU();
  const model::ModelConfig c = tiny_config(false);
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    Arena host_arena("host", HostMemory::instance(), model::weights_bytes(c, dt));
    Arena device_arena("device", ops::memory_resource(Device::CUDA), model::weights_bytes(c, dt));
    model::ModelWeights host = model::allocate_weights(c, dt, host_arena);
    model::ModelWeights device = model::allocate_weights(c, dt, device_arena);
    model::init_random(c, host, 7);
    model::init_random(c, device, 7);
    const model::HostWeights back = model::host_copy(c, device);
    int64_t differ = 0, total = 0;
    for (const model::WeightSpec& s : model::weight_specs(c)) {
      const Tensor& a = model::weight_of(host, s);
      const Tensor& b = model::weight_of(back.weights, s);
      std::vector<double> x(size_t(a.numel())), y(x.size());
      convert_elements(x.data(), DType::F64, a.data, dt, x.size());
      convert_elements(y.data(), DType::F64, b.data, dt, y.size());
      for (size_t i = 0; i < x.size(); ++i) {
        ++total;
        if (x[i] == y[i]) continue;
        ++differ;
        ASSERT_NEAR(y[i], x[i], std::fabs(x[i]) / 128) << s.hf_name << " " << i;
      }
    }
    EXPECT_GT(total, 0);
    EXPECT_LE(differ, 2) << differ << " of " << total << " values differ";
  }
}

}  // namespace
}  // namespace lt::test
