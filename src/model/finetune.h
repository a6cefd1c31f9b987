// What a run trains: the one name of this concept across the configuration (the key `finetune`), the memory
// plan and the trainer.
#pragma once

#include <cstdint>

#include "core/enum_names.h"

namespace lt::model {

// Full: every weight; Partial: the chosen groups and layers (`trainable`, `trainable_layers`); Lora: LoRA
// adapters over frozen base weights.
enum class Finetune : uint8_t { Full, Partial, Lora };
inline constexpr EnumName<Finetune> kFinetuneNames[] = {
    {Finetune::Lora, "lora"}, {Finetune::Full, "full"}, {Finetune::Partial, "partial"}};

}  // namespace lt::model
