// AdamW in the backward under zero3 (optimizer_in_backward with sharding zero3): each decoder layer's
// slices are updated as soon as the layer's gradient reduce-scatter completes (Zero3Layers' on_reduced),
// straight from the reduced block in the gradient buffer, so no rank keeps gradient slices for the layers:
// for Llama-3.1-8B on two GPUs that is 13 GiB of f32 per rank, enough room to keep the GEMM outputs
// (recompute: elementwise) instead of re-running the layers' matrix products.
//
// Exactness: the block a layer's update reads holds exactly what the gradient slice would hold after
// Zero3Layers added it to a zeroed slice (0 + x is x), AdamW runs the same per-tensor arithmetic and
// stochastic-rounding streams (AdamW::begin_step once a step, then step_params), and the logged gradient
// norm adds the same per-tensor sums of squares in the same (optimizer) order as DataParallel::global_norm,
// then over the ranks: losses, norms and weights equal zero3 with the end-of-step AdamW bit for bit
// (tests/dist/mpi/test_mpi_zero3_in_backward.cpp).
//
// What it needs is what a layer's update may not wait for (validated like the one-process
// optimizer_in_backward, train_config_validate.cpp): no clipping, no fp16 loss scaler, whole sequences, full
// or partial fine-tuning, and one micro-batch per rank per step (batch_size = micro_batch_size x ranks):
// with more, a slice would have to keep the earlier micro-batches' sum. The model-level tensors (embedding,
// final norm, LM head) keep zero3's path: their gradients are reduce-scattered after the backward and
// finish_step updates them. A non-finite gradient is found at the step's end, after the layers were updated
// (the run stops there either way, with the end-of-step message).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/arena.h"
#include "dist/communicator.h"
#include "ops/context.h"
#include "train/adamw.h"
#include "train/data_parallel.h"
#include "train/zero3_layers.h"

namespace lt::train {

class Zero3StepInBackward {
 public:
  // `optimizer` is over data_parallel.optimizer_groups() (attach_layers done); `layers` keeps no gradient
  // slices (its on_reduced is set here). Allocates (optimizer tensors) f64 on the device for the norms.
  Zero3StepInBackward(const ops::Context& ctx, dist::Communicator& comm, Zero3Layers& layers,
                      AdamW& optimizer, MemoryResource& memory);

  // Before the step's backward: AdamW's step begins (step is 1-based, lr its learning rate).
  void begin_step(int64_t step, double lr);
  // After the backward and DataParallel::reduce_gradients: checks the loss and the global gradient norm,
  // updates the tensors the layers' hook did not (model-level), and returns the norm. Every layer tensor
  // this rank owns a slice of must have been updated once.
  double finish_step(double loss);

 private:
  void layer_reduced(std::span<const size_t> shards, std::span<const Tensor> reduced);

  ops::Context ctx_;  // the context of its ops
  dist::Communicator& comm_;
  AdamW& optimizer_;
  std::vector<int64_t> optimizer_index_;  // per Zero3Layers shard: its AdamW tensor (-1: no slice here)
  std::vector<int64_t> owned_;            // per shard: the elements of its slice that exist
  std::unique_ptr<Arena> arena_;
  Tensor squares_;                // (optimizer tensors) f64: the layer tensors' sums of squares this step
  std::vector<uint8_t> stepped_;  // per AdamW tensor, this step
  std::vector<uint8_t> layer_tensor_;  // per AdamW tensor: a layer slice (updated by layer_reduced)
  int64_t step_ = 0;
  double lr_ = 0;
};

}  // namespace lt::train
