// Times the CPU attention reference, forward + backward (informative only; never a test).
// Not part of the CMake build; after `cmake --build build/cpu --target lt_ops`:
//   g++ -O2 -std=c++20 -fopenmp -Isrc dev/attention_bench.cpp build/cpu/liblt_ops.a build/cpu/liblt_core.a
//     $(pkg-config --cflags --libs openblas) -lfmt -o build/cpu/attention_bench
//   build/cpu/attention_bench [T] [H] [KVH] [HD] [small_calls]
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "ops/ops.h"

namespace {

// CPU seconds of the whole process (all threads): on a shared machine wall time says little.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
void run(int64_t T_len, int64_t H, int64_t KVH, int64_t HD, int reps) {
  using lt::Tensor;
  const lt::DType dt = sizeof(T) == 8 ? lt::DType::F64 : lt::DType::F32;
  lt::ops::AttentionParams p;
  p.batch = 1;
  p.q_len = p.kv_len = T_len;
  p.heads = H;
  p.kv_heads = KVH;
  p.head_dim = HD;
  p.scale = 1.0 / std::sqrt(double(HD));
  const size_t nq = size_t(T_len * H * HD), nk = size_t(T_len * KVH * HD);
  std::vector<T> q(nq), k(nk), v(nk), out(nq), lse(size_t(H * T_len)), dout(nq), dq(nq), dk(nk), dv(nk);
  for (size_t i = 0; i < nq; ++i)
    q[i] = T(std::sin(0.37 * double(i))), dout[i] = T(std::cos(0.11 * double(i)));
  for (size_t i = 0; i < nk; ++i) k[i] = T(std::sin(0.53 * double(i))), v[i] = T(std::cos(0.29 * double(i)));
  Tensor tq(q.data(), dt, {1, T_len, H, HD}), tk(k.data(), dt, {1, T_len, KVH, HD}),
      tv(v.data(), dt, {1, T_len, KVH, HD});
  Tensor tout(out.data(), dt, {1, T_len, H, HD}), tlse(lse.data(), dt, {1, H, T_len}),
      tdout(dout.data(), dt, {1, T_len, H, HD});
  Tensor tdq(dq.data(), dt, {1, T_len, H, HD}), tdk(dk.data(), dt, {1, T_len, KVH, HD}),
      tdv(dv.data(), dt, {1, T_len, KVH, HD});
  double fwd = 0, bwd = 0, fwd_cpu = 0, bwd_cpu = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_seconds();
    lt::ops::attention_forward(p, tout, tlse, tq, tk, tv, Tensor(), Tensor());
    fwd += seconds_since(t0);
    fwd_cpu += cpu_seconds() - c0;
    t0 = std::chrono::steady_clock::now();
    c0 = cpu_seconds();
    lt::ops::attention_backward(p, tdq, tdk, tdv, tdout, tout, tlse, tq, tk, tv, Tensor(), Tensor());
    bwd += seconds_since(t0);
    bwd_cpu += cpu_seconds() - c0;
  }
  std::printf(
      "%s T=%lld H=%lld KVH=%lld HD=%lld threads=%d: forward %.3f s wall / %.3f s cpu, "
      "backward %.3f s wall / %.3f s cpu (mean of %d)\n",
      sizeof(T) == 8 ? "f64" : "f32", (long long)T_len, (long long)H, (long long)KVH, (long long)HD,
      omp_get_max_threads(), fwd / reps, fwd_cpu / reps, bwd / reps, bwd_cpu / reps, reps);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t T_len = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int64_t H = argc > 2 ? std::atoll(argv[2]) : 8;
  const int64_t KVH = argc > 3 ? std::atoll(argv[3]) : 4;
  const int64_t HD = argc > 4 ? std::atoll(argv[4]) : 64;
  const int reps = argc > 5 ? std::atoi(argv[5]) : 1;
  run<float>(T_len, H, KVH, HD, reps);
  run<double>(T_len, H, KVH, HD, reps);
}
