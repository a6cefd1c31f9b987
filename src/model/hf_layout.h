// Where the engine's layout of a tensor differs from its HF checkpoint's, the conversion at the boundary
// (loading and saving checkpoints and PEFT adapters; tests comparing with transformers' gradients).
// Today one case: BLOOM's fused query_key_value, whose rows the checkpoint interleaves per head, [H, 3, HD]
// (transformers' BloomAttention._reshape), while the engine holds them as [3, H, HD] (all q rows, then k,
// then v), so that q, k and v are row blocks of the fused tensor like any fused qkv (model/weights.h). A row
// keeps its values; only the order of rows changes, so nothing is rounded.
#pragma once

#include "core/tensor.h"
#include "model/config.h"
#include "model/weights.h"

namespace lt::model {

// Whether the fused query_key_value rows are interleaved per head in the checkpoint (ArchitectureDef).
bool qkv_interleaved_per_head(const ModelConfig& config);
// Whether the rows of the weight `spec` names are (the fused query_key_value weight and bias).
bool has_hf_row_order(const ModelConfig& config, const WeightSpec& spec);

// In place, a host tensor whose first dimension is the fused q+k+v rows (3 * H * HD): the fused weight
// (3HHD, D), its bias (3HHD) or a LoRA B (3HHD, r). No-op where the layouts agree.
void qkv_rows_from_hf(const ModelConfig& config, Tensor t);  // [H, 3, HD] -> [3, H, HD]
void qkv_rows_to_hf(const ModelConfig& config, Tensor t);    // [3, H, HD] -> [H, 3, HD]

}  // namespace lt::model
