// `leantune tokenize`: JSONL of strings in, one JSON array of ids per line out (or back with --decode).
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void add_tokenize_command(CLI::App& app);

}  // namespace lt::cli
