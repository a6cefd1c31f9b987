// When the CPU reference ops start a thread team: below this many elements of work, starting and joining
// the team costs more than it saves (and on a loaded machine a barrier can wait a whole time slice).
#pragma once

#include <cstdint>

namespace lt::ops::cpu {

constexpr int64_t kMinParallelWork = int64_t(1) << 15;

}  // namespace lt::ops::cpu
