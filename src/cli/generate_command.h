#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

// leantune generate --model DIR (--prompt TEXT | --ids 1,2,3): continues the prompt with the KV cache
// (greedy by default; --temperature, --top_p, --seed sample).
void add_generate_command(CLI::App& app);

}  // namespace lt::cli
