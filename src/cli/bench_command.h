// `leantune bench`: the performance harness. Times training steps (forward + backward) of whole-sequence
// training and of chunked training on the same model and data, and reports median times, tokens/s and the
// arena high-water of each (optionally per-chunk times and a results JSON).
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void register_bench_command(CLI::App& app);

}  // namespace lt::cli
