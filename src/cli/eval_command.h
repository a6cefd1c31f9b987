#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

// leantune eval --model DIR --data FILE: one JSON line {"loss", "perplexity", "tokens"} on stdout.
void add_eval_command(CLI::App& app);

}  // namespace lt::cli
