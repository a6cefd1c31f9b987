// `leantune quantize MODEL_DIR OUT_DIR [--quant_type nf4|fp4] [--double_quant] [--compute_dtype D]
// [--torch_dtype auto|D]`: the projections quantized as transformers + bitsandbytes' load_in_4bit would,
// saved in their 4-bit layout (io/bnb4_checkpoint.h). `leantune dequantize DIR4 OUT_DIR [--dtype D]`: the
// reverse, an HF checkpoint of the dequantized weights (bitsandbytes' values).
#pragma once

#include <CLI/CLI.hpp>

namespace lt::cli {

void register_quantize_commands(CLI::App& app);

}  // namespace lt::cli
