#!/usr/bin/env bash
# GEMM speed of each OpenBLAS kernel family on this CPU (docs/PERFORMANCE.md, "CPU: OpenBLAS kernels"):
# C (n x n) += A B in float64 and float32 through cblas, under OPENBLAS_CORETYPE unset (OpenBLAS's choice),
# Prescott (its generic fallback), Haswell (AVX2) and SkylakeX (AVX-512), one thread. GFLOP/s = 2 n^3 over the
# median of 5 calls after a warm-up, in process CPU time (robust on a machine shared with other jobs; one
# thread, so CPU time is the call's own) and in wall time.
# Usage: bench/blas_core_gemm.sh [n, default 1024]
set -euo pipefail
n=${1:-1024}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/gemm.c" <<'C'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }
int main(int argc, char** argv) {
  const int n = atoi(argv[1]);
  double* d = malloc(sizeof(double) * 3 * n * n);
  float* f = malloc(sizeof(float) * 3 * n * n);
  for (long i = 0; i < 3L * n * n; ++i) d[i] = f[i] = (float)((i * 7919 % 1000) / 1000.0 - 0.5);
  double cpu[2][5], wall[2][5];
  for (int p = 0; p < 2; ++p)
    for (int r = -1; r < 5; ++r) {
      const double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
      if (p == 0) cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, d, n, d + n * n, n, 1.0, d + 2L * n * n, n);
      else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, f, n, f + n * n, n, 1.0f, f + 2L * n * n, n);
      if (r >= 0) cpu[p][r] = now(CLOCK_PROCESS_CPUTIME_ID) - c0, wall[p][r] = now(CLOCK_MONOTONIC) - w0;
    }
  const double flop = 2.0 * n * n * n;
  for (int p = 0; p < 2; ++p) { qsort(cpu[p], 5, sizeof(double), cmp); qsort(wall[p], 5, sizeof(double), cmp); }
  printf("%s | %.1f | %.1f | %.1f | %.1f\n", openblas_get_corename(), flop / cpu[0][2] * 1e-9,
         flop / wall[0][2] * 1e-9, flop / cpu[1][2] * 1e-9, flop / wall[1][2] * 1e-9);
  return 0;
}
C
cc -O2 -I/usr/include/x86_64-linux-gnu/openblas-pthread "$dir/gemm.c" -o "$dir/gemm" -lopenblas
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(nproc) cores;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); n = $n, OPENBLAS_NUM_THREADS=1"
echo "| OPENBLAS_CORETYPE | kernels | f64 GFLOP/s (CPU time) | f64 GFLOP/s (wall) | f32 GFLOP/s (CPU time) | f32 GFLOP/s (wall) |"
echo "| --- | --- | --- | --- | --- | --- |"
for core in unset Prescott Haswell SkylakeX; do
  case $core in Haswell) need="avx2 fma" ;; SkylakeX) need="avx512f avx512bw avx512dq avx512vl" ;; *) need="" ;; esac
  ok=1
  for f in $need; do [[ $flags == *" $f "* ]] || ok=0; done
  if [ $ok = 0 ]; then echo "| $core | not run: the CPU lacks $need | | | | |"; continue; fi
  if [ $core = unset ]; then
    echo "| (unset) | $(env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS=1 "$dir/gemm" "$n") |"
  else
    echo "| $core | $(env OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS=1 "$dir/gemm" "$n") |"
  fi
done
