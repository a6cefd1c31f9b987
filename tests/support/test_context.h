// The context the tests' op calls pass (ops/context.h): the defaults with the environment's overrides,
// unless a test chooses kernels for a scope (tests/cuda/parity_support.h's ScopedKernelOption sets this
// context's options and restores them). The ops read only the context they are given.
#pragma once

#include "ops/context.h"
#include "support/test_context.h"

namespace lt::test {

inline ops::Context& test_context() {
  static ops::Context context;
  return context;
}

}  // namespace lt::test

namespace {
// `ctx` in the tests' bodies.
[[maybe_unused]] const lt::ops::Context& ctx = lt::test::test_context();
}  // namespace
