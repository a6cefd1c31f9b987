#!/usr/bin/env bash
# The exactness-property tests (ctest label "exactness": chunked == whole, packed == unpacked, accumulation,
# recompute and offload policies, resume ...) under each of OpenBLAS's x86-64 kernel families and thread
# counts: OPENBLAS_CORETYPE unset (OpenBLAS's own choice for this CPU), Prescott (the generic SSE3 kernels
# OpenBLAS falls back to on CPU models it does not know), Haswell (AVX2) and SkylakeX (AVX-512); each with
# OPENBLAS_NUM_THREADS 1 and 2. A test that asserts bit equality where the two sides reach OpenBLAS with
# different shapes fails here on any machine, not only on the one whose CPU happens to pick other kernels.
#
# Each combination first asks `leantune devices` which kernels OpenBLAS actually runs: a forced core type
# that did not take effect (an OpenBLAS built for one CPU only) fails the combination. A core type whose
# instructions this CPU lacks cannot run (OpenBLAS would die on an illegal instruction): it is reported as
# NOT RUN, never as passed. Exit status: non-zero when any combination failed.
#
# Usage: tools/test_exactness_matrix.sh [build dir, default build/cpu] [ctest -j, default nproc]
set -uo pipefail
build=${1:-build/cpu}
jobs=${2:-$(nproc)}
leantune=$build/bin/leantune
[ -x "$leantune" ] || { echo "test_exactness_matrix: $leantune not found; build $build first" >&2; exit 2; }

cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
# The instructions each core type's kernels use (Linux /proc/cpuinfo flag names; pni is SSE3).
required_flags() {
  case $1 in
    Prescott) echo "sse2 pni" ;;
    Haswell) echo "avx2 fma" ;;
    SkylakeX) echo "avx512f avx512cd avx512bw avx512dq avx512vl" ;;
    *) echo "" ;;
  esac
}

passed=() failed=() not_run=()
for core in unset Prescott Haswell SkylakeX; do
  missing=""
  for f in $(required_flags "$core"); do [[ $cpu_flags == *" $f "* ]] || missing+=" $f"; done
  for threads in 1 2; do
    name="OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS=$threads"
    if [ -n "$missing" ]; then
      echo "== exactness [$name]: NOT RUN: this CPU lacks$missing"
      not_run+=("$name (CPU lacks$missing)")
      continue
    fi
    run_env=(env -u OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS="$threads")
    [ "$core" = unset ] || run_env+=(OPENBLAS_CORETYPE="$core")
    blas=$("${run_env[@]}" "$leantune" devices | grep -m1 '^cpu')
    echo "== exactness [$name]: $blas"
    if [ "$core" != unset ] && [[ $blas != *" $core kernels"* ]]; then
      echo "   FAILED: OPENBLAS_CORETYPE=$core did not take effect (is this OpenBLAS built with DYNAMIC_ARCH?)"
      failed+=("$name (core type not applied)")
      continue
    fi
    if [[ $blas != *" $threads thread"* ]]; then
      echo "   FAILED: OPENBLAS_NUM_THREADS=$threads did not take effect"
      failed+=("$name (thread count not applied)")
      continue
    fi
    log=$(mktemp)
    if "${run_env[@]}" ctest --test-dir "$build" -L exactness -j "$jobs" --output-on-failure --no-tests=error \
      >"$log" 2>&1; then
      echo "   $(grep -m1 'tests passed' "$log")"
      passed+=("$name")
    else
      cat "$log"
      failed+=("$name")
    fi
    rm -f "$log"
  done
done

echo "== exactness matrix: ${#passed[@]} passed, ${#failed[@]} failed, ${#not_run[@]} not run"
for n in "${failed[@]}"; do echo "   FAILED   $n"; done
for n in "${not_run[@]}"; do echo "   NOT RUN  $n"; done
[ ${#failed[@]} -eq 0 ]
