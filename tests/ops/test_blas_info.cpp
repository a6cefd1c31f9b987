// Which OpenBLAS kernels the CPU ops run on (ops/blas_info.h): the description names OpenBLAS's own
// core name and thread count, and the hint appears exactly when OpenBLAS runs narrower kernels than the
// CPU supports without the user having chosen them.
#include <cblas.h>
#include <gtest/gtest.h>

#include <string>

#include "ops/blas_info.h"
#include "ops/device.h"

namespace lt {
namespace {

using ops::cpu::blas_core_hint;
using ops::cpu::CpuVectorSupport;

TEST(BlasInfo, DescriptionNamesOpenBlasCoreAndThreads) {
  const std::string line = ops::cpu_blas_description();
  EXPECT_NE(line.find(std::string(openblas_get_corename()) + " kernels"), std::string::npos) << line;
  const int threads = openblas_get_num_threads();
  EXPECT_NE(line.find(std::to_string(threads) + (threads == 1 ? " thread" : " threads")), std::string::npos)
      << line;
  EXPECT_EQ(line.rfind("OpenBLAS ", 0), 0u) << line;
}

TEST(BlasInfo, HintOnlyForGenericKernelsOnAWiderCpu) {
  const CpuVectorSupport sse{false, false}, avx2{true, false}, avx512{true, true};
  // The generic fallback on CPUs that can do better: the hint names the better core type.
  const std::string on_avx512 = blas_core_hint("Prescott", avx512, false);
  EXPECT_NE(on_avx512.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << on_avx512;
  EXPECT_NE(on_avx512.find("Prescott"), std::string::npos) << on_avx512;
  EXPECT_NE(blas_core_hint("Prescott", avx2, false).find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
  EXPECT_NE(blas_core_hint("Sandybridge", avx2, false).find("OPENBLAS_CORETYPE=Haswell"), std::string::npos);
  // Kernels as wide as the CPU, Zen's own, a CPU without AVX2, or a core type the user forced: no hint.
  EXPECT_EQ(blas_core_hint("Prescott", sse, false), "");
  EXPECT_EQ(blas_core_hint("Haswell", avx2, false), "");
  EXPECT_EQ(blas_core_hint("SkylakeX", avx512, false), "");
  EXPECT_EQ(blas_core_hint("Cooperlake", avx512, false), "");
  EXPECT_EQ(blas_core_hint("Zen", avx512, false), "");
  EXPECT_EQ(blas_core_hint("Prescott", avx512, true), "");
}

}  // namespace
}  // namespace lt
