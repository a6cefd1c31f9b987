// QLoRA's base weights: every decoder projection held in bitsandbytes' 4-bit layout (ops/quant4.h: NF4 or
// FP4 codes, block scales, optionally double-quantized) on the run's device, and the one scratch buffer
// each projection is dequantized into, in the compute dtype, right before its GEMM (model/proj.cpp).
//
// Why inside proj_forward / proj_backward, one projection at a time, and not a whole layer at the layer's
// before_forward / before_backward hook: a layer-sized scratch holds all seven projections (for Llama
// shapes about 4x the largest one, gate/up/down being F x D each), a projection-sized one only the largest.
// Each projection's weight is read by one GEMM per forward and per backward (plus one per recompute) either
// way, so the per-projection scratch is the least memory; what it gives up is only the reuse of one
// dequantization between a recompute and its backward. One scratch serves every layer: the dequantization
// and the GEMM that reads it are queued in order on one stream, so the next projection cannot overwrite a
// weight still being read.
//
// Embeddings, norms, biases and the LM head stay dense in ModelWeights, as transformers + PEFT keep them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/proj_id.h"
#include "model/weights.h"
#include "ops/context.h"
#include "ops/quant4.h"

namespace lt::model {

// One projection's 4-bit weight (out, in), as bitsandbytes stores it, on the run's device.
struct Nf4Proj {
  ops::Quant4Type type = ops::Quant4Type::NF4;
  int64_t out = 0, in = 0;
  Tensor packed;         // U8 ((out*in + 1) / 2): element 2k in the high nibble of byte k
  Tensor absmax;         // F32 (blocks): the block scales; empty under double quantization
  Tensor qabsmax;        // U8 (blocks): double quantization's 8-bit scales
  Tensor nested_absmax;  // F32 (nested_blocks(blocks))
  Tensor nested_map;     // F32 (256)
  float offset = 0.0f;   // the mean the nested scales are relative to
  bool double_quant() const { return !qabsmax.empty(); }
};

// Shared by every layer: the dequantized weight of the projection being computed and its scales.
struct Nf4Scratch {
  Tensor weight;  // compute dtype, (largest out*in)
  Tensor absmax;  // F32 (largest projection's blocks); used under double quantization
};

struct Nf4Layer {
  PerProj<Nf4Proj> proj;
  const Nf4Scratch* scratch = nullptr;
};

struct Nf4Weights {
  ops::Quant4Type type = ops::Quant4Type::NF4;
  bool double_quant = false;
  DType compute_dtype = DType::F32;
  std::vector<Nf4Layer> layers;  // L
  Nf4Scratch scratch;
};

// The projection a weight kind is the matrix of (nullopt for embeddings, norms, biases, the LM head): the
// tensors QLoRA holds in 4 bits, exactly those transformers' bitsandbytes quantizer replaces.
std::optional<ProjId> projection_of(WeightKind kind);
// The tensors ModelWeights keeps dense under QLoRA (all but the projections' matrices): pass as the
// `present` filter of weights_bytes / allocate_weights.
bool dense_under_qlora(const WeightSpec& spec);

// Bytes on the device: the 4-bit projections (codes, scales, nested scales and maps; each tensor aligned as
// Arena aligns) and, separately, the scratch (the largest projection in `compute`, and its f32 scales).
size_t nf4_storage_bytes(const ModelConfig& config, bool double_quant);
size_t nf4_scratch_bytes(const ModelConfig& config, DType compute);

// The projections of `quantized` (by HF weight name, every projection of the model, all of one quant type
// and double-quantization setting) copied into `arena` with the scratch, on the arena's device.
std::unique_ptr<Nf4Weights> upload_nf4(const ops::Context& ctx, const ModelConfig& config,
                                       const std::map<std::string, ops::Quant4Weight>& quantized,
                                       DType compute, Arena& arena);
// Points each layer of `weights` at its 4-bit projections (LayerWeights::nf4); their dense tensors are empty.
void attach_nf4(ModelWeights& weights, const Nf4Weights& nf4);

// The projection's weight (out, in) in the compute dtype, dequantized into the scratch (bitsandbytes'
// dequantize_4bit values: code * absmax in f32, one rounding; f64 widens exactly). Valid until the next call.
Tensor dequantize_to_scratch(const ops::Context& ctx, const Nf4Proj& proj, const Nf4Scratch& scratch);

}  // namespace lt::model
