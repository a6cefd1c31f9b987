// The leantune program: parses the command line and runs a subcommand; every error reaches the user as
// one message and a non-zero exit.
#include "cli/commands.h"

int main(int argc, char** argv) { return lt::cli::run_main(argc, argv); }
