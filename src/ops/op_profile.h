// Per-op GPU time for finding where a step goes (the kernel option profile_ops; ops/cuda/op_profile.h says
// how). The trainer calls op_profile_step after each step and prints op_profile_report at the end, each with
// the run's context (whose kernel options say whether profile_ops is on). Without CUDA, or with profile_ops
// off, both do nothing.
#pragma once

#include <string>

#include "ops/context.h"

namespace lt::ops {

void op_profile_step(const Context& ctx);
std::string op_profile_report(const Context& ctx);  // empty when nothing was profiled

}  // namespace lt::ops
