// The process environment, read here and nowhere else in src/ (tests/core/test_process_env.cpp checks
// that no other source file reads it). Configuration keys, not environment variables, choose
// behaviour; what is read here is what others set for the process: the launcher's rank and rendezvous
// variables (dist/launch.h), a library's own settings (OPENBLAS_CORETYPE, ops/blas_info.h), and leantune's
// development overrides of the kernel options (ops/kernel_options.h), each read once by its reader and
// printed in the run header.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lt {

// The variable's value (possibly empty); nullopt when it is not set.
std::optional<std::string> environment_variable(std::string_view name);

}  // namespace lt
