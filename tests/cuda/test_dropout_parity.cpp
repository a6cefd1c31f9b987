// dropout_apply on the GPU draws exactly the CPU's masks (the same core/philox.h functions on both sides).
// f32: the outputs are the CPU's bit for bit. bf16: the GPU multiplies in f32 and rounds once to bf16, which
// is what the CPU f32 op on the same bf16 values followed by a cast to bf16 does: also bit for bit. Batches
// over kDropoutStreamsPerLaunch rows take several launches; the kept fraction is near 1 - p.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/ops.h"
#include "parity_support.h"
#include "support/test_context.h"

namespace lt {
namespace {

using test::DeviceTensor;
using test::random_values;
using test::upload;

std::vector<char> raw(const DeviceTensor& d) {
  std::vector<char> bytes(d.t.bytes());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(bytes.data(), d.t.data, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return bytes;
}

TEST(CudaDropout, SameMasksAsTheCpu) {
  LT_REQUIRE_GPU();
  struct Shape {
    int64_t b, c, d, q_offset;
    double p;
  };
  // (70, ...): more rows than one launch carries streams for.
  const Shape shapes[] = {{1, 1, 1, 0, 0.5},
                          {3, 37, 29, 11, 0.1},
                          {2, 128, 4096, 0, 0.05},
                          {70, 3, 33, 5, 0.5},
                          {4, 256, 1000, 512, 0.3}};
  for (DType dt : {DType::F32, DType::BF16})
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const int64_t rows = s.b * s.c, count = rows * s.d;
      const ops::DropoutParams p{
          .batch = s.b, .tokens = s.c, .dim = s.d, .q_offset = s.q_offset, .p = s.p, .seed = 1000 + si};
      std::vector<uint64_t> streams(static_cast<size_t>(s.b));
      for (size_t b = 0; b < streams.size(); ++b) streams[b] = 0x9E3779B97F4A7C15ull * (b + 1) + si;
      std::vector<double> x =
          random_values(static_cast<size_t>(count), 9500 + si * 2 + uint64_t(dt == DType::BF16), -3, 3);
      DeviceTensor g_x = upload(x, dt, {rows, s.d});  // x now holds the dt-rounded values
      ops::dropout_apply(ctx, p, g_x.t, streams);
      const std::vector<char> gpu = raw(g_x);

      std::vector<float> ref(x.begin(), x.end());  // exact: the values are f32 or bf16
      ops::cpu::dropout_apply(p, Tensor(ref.data(), DType::F32, {rows, s.d}), streams);
      std::vector<char> expected(static_cast<size_t>(count) * dtype_size(dt));
      convert_elements(expected.data(), dt, ref.data(), DType::F32, static_cast<size_t>(count));

      std::vector<double> out(static_cast<size_t>(count));
      convert_elements(out.data(), DType::F64, gpu.data(), dt, out.size());
      int64_t mismatches = 0, first = -1, kept = 0, nonzero = 0;
      const size_t es = dtype_size(dt);
      for (int64_t e = 0; e < count; ++e) {
        if (std::memcmp(gpu.data() + static_cast<size_t>(e) * es,
                        expected.data() + static_cast<size_t>(e) * es, es) != 0) {
          if (first < 0) first = e;
          ++mismatches;
        }
        if (x[static_cast<size_t>(e)] != 0.0) {
          ++nonzero;
          kept += out[static_cast<size_t>(e)] != 0.0;
        }
      }
      char shape_buf[96];
      std::snprintf(shape_buf, sizeof(shape_buf), "(%lld, %lld, %lld) q_offset %lld",
                    static_cast<long long>(s.b), static_cast<long long>(s.c), static_cast<long long>(s.d),
                    static_cast<long long>(s.q_offset));
      const std::string shape = shape_buf;
      std::printf("DROPOUT %-5s %-32s p %.2f kept %.4f (expected %.4f) mismatches %lld\n",
                  std::string(dtype_name(dt)).c_str(), shape.c_str(), s.p,
                  nonzero ? double(kept) / double(nonzero) : 0.0, 1 - s.p,
                  static_cast<long long>(mismatches));
      EXPECT_EQ(mismatches, 0) << dtype_name(dt) << " " << shape << ": first differing element " << first;
      if (nonzero >= 10000) {
        const double n = double(nonzero), sigma = std::sqrt(n * s.p * (1 - s.p));
        EXPECT_NEAR(double(kept), n * (1 - s.p), 5 * sigma) << dtype_name(dt) << " " << shape;
      }
    }
}

TEST(CudaDropout, RefusesOtherDtypes) {
  LT_REQUIRE_GPU();
  std::vector<double> x = random_values(12, 9600);
  DeviceTensor g_x = upload(x, DType::F64, {3, 4});
  try {
    ops::dropout_apply(ctx, {.batch = 1, .tokens = 3, .dim = 4, .p = 0.1, .seed = 1}, g_x.t, {5});
    ADD_FAILURE() << "an f64 tensor was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout_apply on CUDA: dtype f64 is not supported"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lt
