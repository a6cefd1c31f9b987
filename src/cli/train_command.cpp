#include "cli/train_command.h"

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/crash_report.h"
#include "core/error.h"
#include "dist/launch.h"
#include "dist/mpi_communicator.h"
#include "train/checkpoint.h"
#include "train/run_training.h"
#include "train/stop_signal.h"
#include "train/train_config.h"

namespace lt::cli {

namespace {

bool looks_like_yaml(const std::string& arg) {
  auto ends = [&](const char* s) {
    const std::string e(s);
    return arg.size() > e.size() && arg.compare(arg.size() - e.size(), e.size(), e) == 0;
  };
  return ends(".yaml") || ends(".yml");
}

void run_train(const std::vector<std::string>& args) {
  std::string yaml;
  std::vector<std::string> overrides = args;
  if (!overrides.empty() && overrides[0].rfind("--", 0) != 0) {
    LT_CHECK(
        looks_like_yaml(overrides[0]),
        "train: '{}' is not a configuration file (expected CONFIG.yaml first, then --key value overrides)",
        overrides[0]);
    yaml = overrides[0];
    overrides.erase(overrides.begin());
  }
  // Every key is checked, and every path opened, before any work starts.
  train::TrainConfig config = train::load_train_config(yaml, overrides);
  // resume: auto continues from output_dir's latest checkpoint when it has one, else starts fresh (so the
  // same command line restarts a preempted job).
  if (config.resume == "auto") {
    const bool found = !train::list_checkpoints(config.output_dir).empty();
    config.resume = found ? "latest" : "";
    fmt::print("resume: auto: {}\n", found ? "continuing from output_dir's latest checkpoint"
                                           : "no checkpoint in output_dir, starting fresh");
  }
  train::check_engine_settings(config);
  // Line by line even into a file: a rank's log shows how far it got when a launcher or a time limit kills
  // it (a block-buffered stdout loses its last lines with the process).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  train::install_stop_handlers();
  const dist::Launch launch = dist::detect_launch();
  install_crash_report(dist::describe(launch));
  try {
    train::run_training(config);  // a stop by signal has written its checkpoint and says so: exit 0
  } catch (const std::exception& e) {
    // A rank that fails alone would leave the others waiting in a collective (and MPI's finalize would wait
    // for them): under mpirun its message names the rank, and the whole job stops.
    if (launch.world_size == 1 || !launch.by_mpi()) throw;
    fmt::print(stderr, "error: rank {} of {}: {}\n", launch.rank, launch.world_size, e.what());
    std::fflush(stderr);
    dist::mpi_abort_all(1);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("train", "fine-tune a model: leantune train [CONFIG.yaml] [--key value ...]");
  sub->allow_extras();
  sub->footer("Configuration keys (YAML or --key value):\n" + train::train_config_help());
  sub->callback([sub]() { run_train(sub->remaining()); });
}

}  // namespace lt::cli
