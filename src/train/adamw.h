// AdamW with torch.optim.AdamW's semantics (decoupled weight decay, bias correction, non-amsgrad, not
// maximizing), following the order of operations of PyTorch's single-tensor CPU path so that float64 runs
// agree with it to rounding:
//   p *= 1 - lr*wd;  m = lerp(m, g, 1-b1);  v = fma((1-b2)*g, g, v*b2);
//   p += (-lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// The update itself is ops::adamw_step (ops.h), called once per tensor.
// Parameters and gradients live on one device, the CPU (f64, f32, bf16 or f16) or the GPU (f32 or bf16
// parameters, gradients of the parameter's dtype or f32). The moments live here, in an arena on that device,
// in `state_dtype` (f32 by default, whatever the parameter dtype; f64 for float64 exactness runs on CPU).
// Arithmetic runs in double when the parameter or the state is f64, in float otherwise (PyTorch's opmath).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "ops/adamw_many.h"
#include "ops/device.h"

namespace lt::train {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  DType state_dtype = DType::F32;  // F32 or F64
  // A parameter whose name contains any of these substrings gets no weight decay (empty: all decay).
  std::vector<std::string> no_decay_substrings;
  // bf16 parameters (full fine-tuning without f32 masters) are rounded stochastically from the f32 update
  // (ops.h); each tensor draws its own bits from (seed, its index, the step).
  bool stochastic_rounding = false;
  uint64_t seed = 0;
  // bitsandbytes' AdamW with 8-bit state (optim adamw_8bit; train/adamw8bit.h): its arithmetic and its state
  // (8-bit codes with a per-256 absmax; f32 state and bnb's 32-bit update for tensors under 4096 elements and
  // for those named by f32_state_substrings). Needs f32 state_dtype and no stochastic rounding.
  bool eight_bit = false;
  std::vector<std::string> f32_state_substrings;  // eight_bit: names that keep 32-bit state (HF: embeddings)
  // offload_optimizer (ZeRO-Offload's placement): the moments live in page-locked host memory, as do
  // parameters given there (the trainer's f32 masters); each update copies its tensors' state into one
  // device window, runs the same update kernel there and copies it back (train/adamw_offload.cpp), so the
  // bits are those of the on-device optimizer. Not with eight_bit.
  bool offload = false;
  size_t offload_window_bytes = size_t(1) << 30;  // the device window (at least the largest tensor's state)
};

// HF Trainer's usual exclusion for Llama-family names: biases and every *norm weight.
std::vector<std::string> bias_and_norm_no_decay();

// One trainable tensor: the parameter and its gradient (same element count; shapes may differ in view).
struct ParamGroup {
  std::string name;
  Tensor param;  // any shape, floating
  Tensor grad;   // param.numel() elements, floating, on the parameter's device
  // Optional: a narrower copy the model computes with (a master's working weight, a LoRA adapter's compute
  // copy), param.numel() elements on its device; every step writes it, rounded to nearest, in the same pass.
  Tensor compute_copy{};
  // The decoder layer whose backward completes the gradient (-1: model-level; data parallel runs reduce a
  // layer's gradients as soon as its backward is done).
  int64_t layer = -1;
};

class AdamW {
 public:
  // Validates every tensor (names the offending one) and allocates zeroed moments.
  AdamW(const ops::Context& ctx, std::vector<ParamGroup> params, AdamWOptions options);

  // One optimizer step at learning rate `lr`: increments the step count t, then updates every parameter.
  void step(double lr);
  // The same step in parts (AdamW applied during backward, layer by layer): begin_step() increments t, then
  // step_params updates the parameters at `indices` (into params()). Each tensor's update is step(lr)'s own
  // (same arithmetic, same stochastic-rounding stream from the seed, its index and t), so stepping every
  // parameter once between two begin_step calls, in any order and grouping, gives step(lr)'s bits.
  void begin_step();
  void step_params(double lr, std::span<const size_t> indices);

  // offload: queues the copies of these parameters' state into the device window now, so that the
  // step_params(lr, indices) that follows finds them there (or started); a no-op otherwise.
  void prefetch(std::span<const size_t> indices);
  // offload: returns once every copy back to host memory is done (state and host parameters readable).
  // step() ends with it; a caller of step_params calls it before reading them.
  void wait_offloaded();

  int64_t steps_taken() const { return step_; }
  // Sets the step count t (a state assembled from elsewhere: the slices of a sharded optimizer).
  void set_steps_taken(int64_t steps);
  const AdamWOptions& options() const { return options_; }
  const std::vector<ParamGroup>& params() const { return params_; }
  // Re-points the gradient (or parameter) views, e.g. after buffers move; numel and dtype must stay.
  void rebind(size_t index, Tensor param, Tensor grad);
  // The same with the compute copy (which must stay empty or keep its numel and dtype).
  void rebind(size_t index, Tensor param, Tensor grad, Tensor compute_copy);
  bool decays(const std::string& name) const;

  // Views of the whole optimizer state for checkpoints: "step" (f64, (1), host), then for every parameter
  // "<name>.exp_avg" and "<name>.exp_avg_sq" (state dtype, the parameter's shape, on its device); with
  // eight_bit, bitsandbytes' names instead: "<name>.state1", "<name>.state2" (u8 codes or f32, the
  // parameter's shape) and, for 8-bit state, "<name>.absmax1", "<name>.absmax2" (f32, one per 256 elements).
  std::vector<io::NamedTensor> state_tensors();
  // Restores the state from host tensors named as state_tensors() names them; converts floating dtypes
  // (8-bit codes must be u8);
  // throws naming a missing tensor, a shape mismatch or a non-integral step.
  // `source` names where the tensors came from (the checkpoint's optimizer file) in every message.
  void load_state(const std::vector<io::NamedTensor>& tensors, const std::string& source = "optimizer state");

 private:
  ops::Context ctx_;  // the context of its ops
  struct Moments {
    Tensor m, v;              // (numel) state dtype, on the parameters' device (eight_bit: u8 codes or f32)
    Tensor absmax1, absmax2;  // eight_bit with 8-bit codes: (ceil(numel / 256)) f32; empty otherwise
  };
  std::vector<ParamGroup> params_;
  std::unique_ptr<Arena> arena_;  // the moments
  std::vector<Moments> moments_;
  AdamWOptions options_;
  ops::AdamWTensor update(size_t index, double lr);               // one tensor's step at t = step_
  void step_tensors(double lr, std::span<const size_t> indices);  // update() of each, in one call
  // offload: update() of each through the device window, in batches that fit it (adamw_offload.cpp).
  void step_offloaded(double lr, std::span<const size_t> indices);
  struct StagedBatch {  // offload: a batch's state copied (or being copied) into the window
    struct Staged {
      Tensor m, v, param;  // (numel) in the window; param empty when the parameter is on the device
    };
    struct Back {
      Tensor host, staged;
    };
    std::vector<size_t> indices;
    std::vector<Staged> staged;
    std::vector<Back> back;
    int64_t ready = -1;  // the ticket of the batch's last copy into the window
  };
  // Queues the copies into the window of the first of `indices` that fit it.
  StagedBatch stage_batch(std::span<const size_t> indices);
  std::optional<StagedBatch> prefetched_;
  size_t staged_bytes(size_t index) const;         // offload: the window bytes of tensor `index`'s state
  std::unique_ptr<Arena> window_;                  // offload: (window bytes) on the device
  std::unique_ptr<ops::TransferQueue> transfers_;  // offload: one FIFO copy stream (see adamw_offload.cpp)
  int64_t last_copy_back_ = -1;                    // offload: the ticket of the newest copy to host memory

  int64_t step_ = 0;
  double step_as_double_ = 0;  // backing store of the "step" state tensor
};

}  // namespace lt::train
