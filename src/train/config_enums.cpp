#include "train/config_enums.h"

#include "core/error.h"

namespace lt::train {
namespace {

template <class E, size_t N>
E parse(const EnumName<E> (&table)[N], const std::string& text, const std::string& who, const char* key) {
  return parse_enum(std::span<const EnumName<E>>(table), text, fmt::format("{}: '{}'", who, key));
}

}  // namespace

Finetune finetune_of(const TrainConfig& c) {
  return parse(model::kFinetuneNames, c.finetune, "config", "finetune");
}
Precision precision_of(const TrainConfig& c) {
  return parse_precision(c.precision, "config");
}
Device device_of(const TrainConfig& c) {
  return parse_device(c.device, "config");
}
Adapter adapter_of(const TrainConfig& c) {
  return parse(kAdapterNames, c.adapter, "config", "adapter");
}
Precision parse_precision(const std::string& text, const std::string& who) {
  return parse(kPrecisionNames, text, who, "precision");
}
Device parse_device(const std::string& text, const std::string& who) {
  return parse(kDeviceNames, text, who, "device");
}

}  // namespace lt::train
