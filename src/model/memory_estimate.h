// A first ESTIMATE of training memory on one device, from the config and the run's settings: what a
// straightforward decoder trained on whole sequences (no chunking, no recompute, no offload) keeps alive at
// the peak of a step. It is not the memory plan (that one allocates the real buffers and comes later): it
// leaves out transient buffers (one layer's activation gradients during backward, GEMM workspaces, the
// allocator's slack, the CUDA context) and counts every tensor at its nominal size.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace lt::model {

enum class TrainingMode : uint8_t { Full, Lora };

struct MemoryEstimateSettings {
  TrainingMode mode = TrainingMode::Full;
  int64_t batch = 1;             // B
  int64_t seq_len = 2048;        // T
  int64_t compute_bytes = 2;     // bytes per element of the compute dtype (bf16/fp16 2, fp32 4)
  int64_t optimizer_states = 2;  // fp32 states per trainable parameter (AdamW: m and v)
  // Full only: AdamW applied during backward, layer by layer: gradients for the model-level weights and one
  // layer (shared by all layers), not for every layer.
  bool optimizer_in_backward = false;
  int64_t lora_rank = 16;  // r (LoRA only)
  std::vector<std::string> lora_targets = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                           "gate_proj", "up_proj", "down_proj"};  // LoRA only
};

// Byte counts by category. Gradients, optimizer states and master weights are fp32; saved statistics
// (RMSNorm rstd, attention lse) are fp32; logits are upcast to fp32 for the loss, as transformers does.
struct MemoryEstimate {
  int64_t params = 0;                 // every parameter of the model (+ LoRA adapters), a count
  int64_t trainable_params = 0;       // all parameters (full) or the adapters (LoRA), a count
  int64_t weights = 0;                // params x compute_bytes (the frozen base for LoRA, plus the adapters)
  int64_t master_weights = 0;         // trainable x 4: fp32 master copies; 0 when the compute dtype is fp32
  int64_t gradients = 0;              // trainable x 4 (optimizer_in_backward: L - 1 layers fewer)
  int64_t optimizer_state = 0;        // trainable x optimizer_states x 4
  int64_t activations_per_layer = 0;  // tensors one decoder layer keeps for backward (B x T tokens)
  int64_t activations = 0;            // L x per layer + the final norm's input, output and rstd
  int64_t logits = 0;                 // (B*T, V) fp32
  int64_t logits_grad = 0;            // (B*T, V) fp32

  int64_t total() const {
    return weights + master_weights + gradients + optimizer_state + activations + logits + logits_grad;
  }
  // (name, bytes) rows of the categories summed by total(), then "total"; print them with format_bytes.
  std::vector<std::pair<std::string, int64_t>> rows() const;
};

MemoryEstimate estimate_training_memory(const ModelConfig& cfg, const MemoryEstimateSettings& settings);

}  // namespace lt::model
