// Which BLAS kernels the CPU ops run on. Debian's OpenBLAS is built for every x86-64 core type and picks
// its GEMM kernels by the CPU at load time (its "core name"; OPENBLAS_CORETYPE forces one). A CPU model it
// does not know gets the generic Prescott (SSE3) kernels, several times slower than the AVX2 or AVX-512 ones
// the CPU could run, so `leantune devices` says which ones run and, in that case, how to pick better ones.
#pragma once

#include <string>

namespace lt::ops::cpu {

struct CpuBlasInfo {
  std::string library;  // "OpenBLAS 0.3.21" (from openblas_get_config)
  std::string core;     // the kernels' core type: "Haswell", "SkylakeX", "Prescott" ...
  bool forced = false;  // OPENBLAS_CORETYPE is set (OpenBLAS ignores a name it does not know)
  int threads = 1;      // OpenBLAS's thread count (OPENBLAS_NUM_THREADS, else the cores)
  std::string hint;     // how to pick faster kernels, or empty when these are the best the CPU runs
};
CpuBlasInfo cpu_blas_info();

// What this CPU can run of OpenBLAS's x86-64 kernels.
struct CpuVectorSupport {
  bool avx2_fma = false;  // the Haswell and Zen kernels
  bool avx512 = false;    // F, CD, BW, DQ, VL: the SkylakeX kernels
};
CpuVectorSupport cpu_vector_support();

// Empty when `core` uses the widest vectors `cpu` supports or the user `forced` the core type; else one
// sentence naming the OPENBLAS_CORETYPE value that selects faster kernels.
std::string blas_core_hint(const std::string& core, CpuVectorSupport cpu, bool forced);

}  // namespace lt::ops::cpu
