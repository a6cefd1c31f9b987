#include "ops/blas_info.h"

#include <cblas.h>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "core/process_env.h"
#include "ops/device.h"

namespace lt::ops::cpu {
namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// OpenBLAS core types whose double GEMM kernels use AVX2/FMA, and those of them using AVX-512.
constexpr std::array<std::string_view, 6> kAvx2Cores = {"Haswell",  "Zen",        "Excavator",
                                                        "SkylakeX", "Cooperlake", "SapphireRapids"};
constexpr std::array<std::string_view, 3> kAvx512Cores = {"SkylakeX", "Cooperlake", "SapphireRapids"};

bool is_one_of(const std::string& core, auto&& names) {
  return std::any_of(names.begin(), names.end(),
                     [&](std::string_view n) { return equal_ignoring_case(core, n); });
}

}  // namespace

CpuVectorSupport cpu_vector_support() {
  __builtin_cpu_init();
  CpuVectorSupport s;
  s.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  s.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  return s;
}

std::string blas_core_hint(const std::string& core, CpuVectorSupport cpu, bool forced) {
  if (forced) return "";  // the user chose these kernels
  const bool uses_avx2 = is_one_of(core, kAvx2Cores), uses_avx512 = is_one_of(core, kAvx512Cores);
  const char* better = nullptr;
  if (cpu.avx512 && !uses_avx512 && !equal_ignoring_case(core, "Zen"))
    better = "SkylakeX";  // Zen's kernels are tuned for AMD's AVX2 units: not a fallback
  else if (cpu.avx2_fma && !uses_avx2)
    better = "Haswell";
  if (!better) return "";
  return fmt::format(
      "this CPU has {} but OpenBLAS chose its {} kernels (a CPU model it does not know); "
      "OPENBLAS_CORETYPE={} selects faster ones (docs/TRAINING.md)",
      cpu.avx512 ? "AVX-512" : "AVX2", core, better);
}

CpuBlasInfo cpu_blas_info() {
  CpuBlasInfo info;
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": its first two words (npos + 1 wraps to 0: whole string).
  const std::string text = config ? config : "OpenBLAS";
  info.library = text.substr(0, text.find(' ', text.find(' ') + 1));
  info.core = core ? core : "unknown";
  info.threads = openblas_get_num_threads();
  static const bool forced = !environment_variable("OPENBLAS_CORETYPE").value_or("").empty();  // read once
  info.forced = forced;
  info.hint = blas_core_hint(info.core, cpu_vector_support(), info.forced);
  return info;
}

}  // namespace lt::ops::cpu

namespace lt::ops {

std::string cpu_blas_description() {
  const cpu::CpuBlasInfo info = cpu::cpu_blas_info();
  std::string line =
      fmt::format("{}, {} kernels{}, {} thread{}", info.library, info.core,
                  info.forced ? " (OPENBLAS_CORETYPE)" : "", info.threads, info.threads == 1 ? "" : "s");
  if (!info.hint.empty()) line += "; " + info.hint;
  return line;
}

}  // namespace lt::ops
