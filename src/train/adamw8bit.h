// bitsandbytes' AdamW with 8-bit state inside train::AdamW (AdamWOptions::eight_bit; HF's optim "adamw_8bit",
// "adamw_bnb_8bit" and "paged_adamw_8bit", which are one optimizer: bnb.optim.AdamW with optim_bits=8; paging
// only moves its state between host and device). The update is ops/adamw8bit.h's, bit-identical to
// bitsandbytes' CPU backend. Which tensors get 8-bit codes follows bitsandbytes and HF's Trainer exactly:
// a tensor of at least 4096 elements (min_8bit_size) gets u8 codes with one f32 absmax per 256 elements;
// a smaller one, and every embedding (HF overrides nn.Embedding weights to optim_bits=32), keeps f32 moments
// and bitsandbytes' 32-bit AdamW update.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/adamw.h"

namespace lt::train {

// Whether the tensor `name` of `numel` elements gets 8-bit codes (else f32 state).
bool adamw8bit_quantized(const AdamWOptions& options, const std::string& name, int64_t numel);

// Device bytes of one tensor's state: 2 per element and 8 per 256-element block with 8-bit codes, 8 per
// element with f32 state.
int64_t adamw8bit_state_bytes(int64_t numel, bool quantized);

// The substrings of the names HF's Trainer keeps at 32-bit state: the token embedding (nn.Embedding).
std::vector<std::string> hf_embedding_f32_state();

// Refuses options the 8-bit optimizer cannot honour, naming the option.
void check_adamw8bit_options(const AdamWOptions& options);

}  // namespace lt::train
