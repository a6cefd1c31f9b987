// The files of a model directory that belong beside its weights (tokenizer, generation defaults): copied by
// every command that writes a new model directory from an old one.
#pragma once

#include <string>
#include <vector>

namespace lt::cli {

// Copies those of the companion files that exist in `from` into `to`; returns the names copied.
std::vector<std::string> copy_companion_files(const std::string& from, const std::string& to,
                                              const char* command);

}  // namespace lt::cli
