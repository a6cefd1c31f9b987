#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

// leantune devices: one line per device this build can train on ("cpu", then "cuda  NAME (sm_XY), free /
// total" when the build has CUDA and a GPU is visible). Scripts (the demo) pick the device from it.
void add_devices_command(CLI::App& app);

}  // namespace lt::cli
