// Per-op GPU time for finding where a step goes (LT_PROFILE_OPS=1; ops/cuda/op_profile.h says how). The
// trainer calls op_profile_step after each step and prints op_profile_report at the end. Without CUDA, or
// with the variable unset, both do nothing.
#pragma once

#include <string>

namespace lt::ops {

void op_profile_step();
std::string op_profile_report();  // empty when nothing was profiled

}  // namespace lt::ops
