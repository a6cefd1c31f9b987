// The enumerated keys of a TrainConfig as enums: the name tables (the configuration's accepted values come
// from them) and the typed reading of a config's value. Past the configuration reader, code compares these
// enums, never the strings.
#pragma once

#include <cstdint>
#include <span>

#include "core/enum_names.h"
#include "core/tensor.h"
#include "model/finetune.h"
#include "train/train_config.h"

namespace lt::train {

using model::Finetune;

enum class Precision : uint8_t { Fp64, Fp32, Bf16, Fp16 };
inline constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::Fp64, "fp64"},
                                                          {Precision::Fp32, "fp32"},
                                                          {Precision::Bf16, "bf16"},
                                                          {Precision::Fp16, "fp16"}};
inline constexpr EnumName<Device> kDeviceNames[] = {{Device::CPU, "cpu"}, {Device::CUDA, "cuda"}};
// The adapter kind with finetune lora: lora over dense base weights, qlora over NF4 ones.
enum class Adapter : uint8_t { Lora, Qlora };
inline constexpr EnumName<Adapter> kAdapterNames[] = {{Adapter::Lora, "lora"}, {Adapter::Qlora, "qlora"}};

// A config's value as its enum; a value outside the table (a config that skipped validation) is refused
// naming the key.
Finetune finetune_of(const TrainConfig& config);
Precision precision_of(const TrainConfig& config);
Device device_of(const TrainConfig& config);
Adapter adapter_of(const TrainConfig& config);
// The same for a value given alone (eval and generate take precision and device without a TrainConfig).
Precision parse_precision(const std::string& text, const std::string& who);
Device parse_device(const std::string& text, const std::string& who);

}  // namespace lt::train
