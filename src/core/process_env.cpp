#include "core/process_env.h"

#include <cstdlib>

namespace lt {

std::optional<std::string> environment_variable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace lt
