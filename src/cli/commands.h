// The subcommands of `leantune` register themselves on the CLI11 app here.
#pragma once

namespace lt::cli {

int run_main(int argc, char** argv);

}  // namespace lt::cli
