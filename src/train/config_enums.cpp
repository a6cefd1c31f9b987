#include "train/config_enums.h"

#include <fmt/format.h>

namespace lt::train {

Precision parse_precision(const std::string& text, const std::string& who) {
  return parse_enum(std::span<const EnumName<Precision>>(kPrecisionRequestNames), text,
                    fmt::format("{}: 'precision'", who));
}
Device parse_device(const std::string& text, const std::string& who) {
  return parse_enum(std::span<const EnumName<Device>>(kDeviceRequestNames), text,
                    fmt::format("{}: 'device'", who));
}

}  // namespace lt::train
