#include "cli/devices_command.h"

#include <fmt/core.h>

#include "ops/device.h"

namespace lt::cli {

void add_devices_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("devices", "the devices this build can train on, one per line");
  sub->callback([] {
    fmt::print("cpu  {}\n", ops::cpu_blas_description());
    if (!ops::cuda_available()) return;
    const ops::DeviceMemoryInfo m = ops::device_memory_info(Device::CUDA);
    fmt::print("cuda  {}, {} free of {}\n", ops::device_description(Device::CUDA),
               format_bytes(double(m.free_bytes)), format_bytes(double(m.total_bytes)));
  });
}

}  // namespace lt::cli
