// Did-you-mean for the command line: an option a subcommand does not have is named with the subcommand's
// closest option, as `train` names the closest configuration key.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lt::cli {

// For the first `--name` in argv that neither the subcommand named on the command line nor the program
// has: "<sub>: unknown option '--name'; did you mean '--other'?" (or, with none close, where the options
// are listed). "" when every option is known (the parse failed for another reason).
std::string unknown_option_message(const CLI::App& app, int argc, const char* const* argv);

}  // namespace lt::cli
