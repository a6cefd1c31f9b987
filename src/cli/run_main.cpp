#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "cli/bench_command.h"
#include "cli/commands.h"
#include "cli/devices_command.h"
#include "cli/eval_command.h"
#include "cli/export_command.h"
#include "cli/generate_command.h"
#include "cli/info_command.h"
#include "cli/option_hint.h"
#include "cli/preview_command.h"
#include "cli/quantize_command.h"
#include "cli/tokenize_command.h"
#include "cli/train_command.h"
#include "cli/verify_command.h"
#include "core/error.h"
#include "core/version.h"

namespace lt::cli {

int run_main(int argc, char** argv) {
  CLI::App app{"leantune: fine-tune Llama-family models (full, LoRA) with exact, memory-lean training"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("--verbose", verbose, "show where in leantune an error was raised");
  app.set_version_flag("--version", std::string("leantune ") + lt::kLeantuneVersion);
  register_info_command(app);
  register_verify_command(app);
  register_export_command(app);
  register_quantize_commands(app);
  add_tokenize_command(app);
  add_train_command(app);
  add_preview_command(app);
  add_eval_command(app);
  add_generate_command(app);
  register_bench_command(app);
  add_devices_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An option the subcommand does not have (the cause of a failed parse even when CLI11 first finds a
    // required option missing, as with a misspelled --model): named with its closest one.
    if (e.get_exit_code() != 0)
      if (const std::string hint = unknown_option_message(app, argc, argv); !hint.empty()) {
        fmt::print(stderr, "error: {}\n", hint);
        return 1;
      }
    return app.exit(e);
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    if (verbose) fmt::print(stderr, "  (raised at {})\n", e.where());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace lt::cli
