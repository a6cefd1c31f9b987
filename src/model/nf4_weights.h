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
// Fused projections (Phi-3's qkv_proj and gate_up_proj, BLOOM's query_key_value) are what bitsandbytes makes
// of them: ONE 4-bit weight of the fused matrix in the checkpoint's row order (blocks of 64 over its
// flattening, one double quantization over all its block scales), so that its bytes are bitsandbytes'. Each
// part (q, k, v; gate, up) is a set of row runs of that matrix (BLOOM's per-head interleave: one run per
// head) and is dequantized alone, run by run, into the scratch: the part's rows in the engine's order,
// exactly the dense part a 16-bit run holds. A run is whole quantization blocks when it starts on a block
// boundary (every released model: hidden sizes are multiples of 64); a fused weight whose runs do not is
// refused naming it.
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

// One projection's 4-bit weight (out, in), as bitsandbytes stores it, on the run's device; for a part of a
// fused weight, the fused matrix's 4-bit tensors and where the part's rows are in it.
struct Nf4Proj {
  ops::Quant4Type type = ops::Quant4Type::NF4;
  int64_t out = 0, in = 0;  // the projection's (the part's) shape
  // A part of a fused weight of fused_rows rows (0: not fused): `runs` runs of out / runs rows each, run g
  // starting at row first_row + g * run_stride of the fused matrix (in the checkpoint's row order).
  int64_t fused_rows = 0, first_row = 0, run_stride = 0, runs = 1;
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
  Tensor weight;  // compute dtype, (largest projection's or part's out*in)
  Tensor
      absmax;  // F32 (the blocks of the largest 4-bit tensor, a fused one whole); under double quantization
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

// The projection a weight kind is the matrix of (nullopt for fused weights, embeddings, norms, biases, the
// LM head).
std::optional<ProjId> projection_of(WeightKind kind);
// The projections a weight kind holds the matrices of: one for q_proj ... down_proj, q/k/v for a fused qkv,
// gate/up for a fused gate_up, none for the rest. Those with any are the tensors QLoRA holds in 4 bits,
// exactly those transformers' bitsandbytes quantizer replaces (every nn.Linear of the decoder).
std::vector<ProjId> projections_in(WeightKind kind);
// The tensors ModelWeights keeps dense under QLoRA (all but the projections' matrices): pass as the
// `present` filter of weights_bytes / allocate_weights.
bool dense_under_qlora(const WeightSpec& spec);

// Refuses a model whose fused 4-bit weights this layout cannot hold (a part's run of rows starting inside a
// quantization block), naming the tensor: called before anything is read or quantized.
void check_4bit_layout(const ModelConfig& config);

// Bytes on the device: the 4-bit projections (codes, scales, nested scales and maps; each tensor aligned as
// Arena aligns) and, separately, the scratch (the largest projection in `compute`, and its f32 scales).
size_t nf4_storage_bytes(const ModelConfig& config, bool double_quant);
size_t nf4_scratch_bytes(const ModelConfig& config, DType compute);

// The projections of `quantized` (by HF weight name, every 4-bit weight of the model, fused ones whole in the
// checkpoint's row order, all of one quant type and double-quantization setting) copied into `arena` with the
// scratch, on the arena's device.
std::unique_ptr<Nf4Weights> upload_nf4(const ops::Context& ctx, const ModelConfig& config,
                                       const std::map<std::string, ops::Quant4Weight>& quantized,
                                       DType compute, Arena& arena);
// Points each layer of `weights` at its 4-bit projections (LayerWeights::nf4); their dense tensors are empty.
void attach_nf4(ModelWeights& weights, const Nf4Weights& nf4);

// The projection's weight (out, in) in the compute dtype, dequantized into the scratch (bitsandbytes'
// dequantize_4bit values: code * absmax in f32, one rounding; f64 widens exactly); a fused weight's part is
// its rows alone, in the engine's order. Valid until the next call.
Tensor dequantize_to_scratch(const ops::Context& ctx, const Nf4Proj& proj, const Nf4Scratch& scratch);

}  // namespace lt::model
