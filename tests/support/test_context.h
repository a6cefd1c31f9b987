// The context the tests' op calls pass (ops/context.h): the defaults with the environment's overrides,
// unless a test chooses kernels for a scope (tests/cuda/parity_support.h's ScopedKernelOption sets this
// context's options and restores them). The ops read only the context they are given. One context per test
// binary, so its GPU handles (cuBLASLt, cuDNN, their plan caches) serve every test of the binary, as a run's
// serve its steps.
#pragma once

#include "ops/context.h"
#include "support/test_context.h"

namespace lt::test {

inline ops::Context& test_context() {
  // Never destroyed: at static destruction the CUDA runtime may already be gone, and with it what the GPU
  // handles would give back.
  static ops::Context& context = *new ops::Context();
  return context;
}

}  // namespace lt::test

namespace {
// `ctx` in the tests' bodies.
[[maybe_unused]] const lt::ops::Context& ctx = lt::test::test_context();
}  // namespace
