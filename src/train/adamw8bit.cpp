#include "train/adamw8bit.h"

#include "core/error.h"
#include "ops/adamw8bit.h"

namespace lt::train {

bool adamw8bit_quantized(const AdamWOptions& options, const std::string& name, int64_t numel) {
  if (!ops::adamw8bit_quantizes(numel)) return false;
  for (const std::string& s : options.f32_state_substrings)
    if (name.find(s) != std::string::npos) return false;
  return true;
}

int64_t adamw8bit_state_bytes(int64_t numel, bool quantized) {
  return quantized ? 2 * numel + 2 * int64_t(sizeof(float)) * ops::adamw8bit_blocks(numel)
                   : 2 * int64_t(sizeof(float)) * numel;
}

std::vector<std::string> hf_embedding_f32_state() {
  return {"embed_tokens"};
}

void check_adamw8bit_options(const AdamWOptions& options) {
  LT_CHECK(
      options.state_dtype == DType::F32,
      "optim adamw_8bit keeps 8-bit (or f32) moments; state dtype {} is not possible with it (float64 runs "
      "use optim adamw_torch)",
      dtype_name(options.state_dtype));
  LT_CHECK(
      !options.stochastic_rounding,
      "optim adamw_8bit rounds parameters to nearest as bitsandbytes does; stochastic_rounding: true is not "
      "possible with it");
}

}  // namespace lt::train
