// Per-op GPU time (the kernel option profile_ops): every CUDA op that goes through LT_OP_DISPATCH
// (ops/dispatch.h) is bracketed by two CUDA events on its context's stream, and the trainer folds them into
// per-op totals after each step (ops/op_profile.h). The events time the stream between the op's first and
// last launch, so an op that waits on the host (launch-bound) shows that wait too. Only the outermost op of a
// nest is timed. Off (the default), a scope costs one cached flag test. No CUDA types here: ops/dispatch.h
// includes it.
#pragma once

#include <cstdint>
#include <string>

#include "ops/context.h"

namespace lt::ops::cuda {

bool op_profile_enabled(const Context& ctx);  // ctx's kernel option profile_ops not off
// profile_ops shapes: ops that describe their call (op_profile_detail) are reported per description too
// (e.g. every linear shape on its own row).
bool op_profile_shapes(const Context& ctx);
// Appends `detail` to the name the innermost timed op of this thread is reported under (callers ask
// op_profile_shapes first).
void op_profile_detail(const std::string& detail);

class OpProfileScope {
 public:
  OpProfileScope(const Context& ctx, const char* op);
  ~OpProfileScope();
  OpProfileScope(const OpProfileScope&) = delete;
  OpProfileScope& operator=(const OpProfileScope&) = delete;

 private:
  int64_t record_ = -1;     // index of its record, -1: not timed (off, or nested in a timed op)
  bool counted_ = false;    // took part in the nesting depth
  void* stream_ = nullptr;  // cudaStream_t: the op's
};

// After a step (its GPU work finished): folds the step's records into the totals; the first step's are
// dropped (plan builds, autotuning, first-touch allocations). ctx: the run's (profiling on or off).
void op_profile_step(const Context& ctx);
// The totals per op, slowest first, per measured step; empty when profiling is off or nothing was measured.
std::string op_profile_report(const Context& ctx);

}  // namespace lt::ops::cuda
