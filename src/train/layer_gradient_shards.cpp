#include "train/layer_gradient_shards.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "train/slice_layout.h"

namespace lt::train {
using namespace slice_layout;

bool LayerGradientShards::slices_anything(const model::ModelConfig& config,
                                          const model::TrainableFn& trainable) {
  for (const model::WeightSpec& spec : model::weight_specs(config))
    if (spec.layer >= 0 && trainable(spec)) return true;
  return false;
}

LayerGradientShards::Footprint LayerGradientShards::footprint(const model::ModelConfig& config,
                                                              DType grad_dtype,
                                                              const model::TrainableFn& trainable,
                                                              int world) {
  Footprint f;
  std::vector<size_t> layer(size_t(config.num_layers), 0);
  size_t scratch = 0;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (spec.layer < 0 || !trainable(spec)) continue;
    const int64_t c = capacity_of(spec.numel(), world);
    f.slices += aligned(size_t(c) * dtype_size(grad_dtype));
    layer[size_t(spec.layer)] += aligned(size_t(c * world) * dtype_size(grad_dtype));
    scratch = std::max(scratch, aligned(size_t(c) * dtype_size(grad_dtype)));
  }
  f.buffers = scratch + 2 * *std::max_element(layer.begin(), layer.end());
  return f;
}

LayerGradientShards::LayerGradientShards(const ops::Context& ctx, dist::Communicator& comm,
                                         const model::ModelConfig& config, model::ModelWeights& grads,
                                         std::unique_ptr<Arena>& grads_arena, bool overlap, bool keep_slices,
                                         const model::TrainableFn& unallocated)
    : ctx_(ctx),
      comm_(comm),
      config_(config),
      grads_(grads),
      grad_dtype_(grads.dtype),
      device_(grads_arena->device()),
      overlap_(overlap),
      keep_slices_(keep_slices) {
  const int world = comm.world_size();
  const Device device = device_;
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  // A gradient of `grads`, or the shape of one never allocated (no data: only re-pointed below); nullopt for
  // a tensor without gradient.
  auto gradient = [&](const model::WeightSpec& spec) -> std::optional<Tensor> {
    const Tensor& g = model::weight_of(grads, spec);
    if (!g.empty()) return g;
    if (spec.layer < 0 || !unallocated || !unallocated(spec)) return std::nullopt;
    Tensor shape = model::spec_view(spec, nullptr, grad_dtype_);
    shape.device = device;
    return shape;
  };
  by_layer_.resize(size_t(config.num_layers));
  std::vector<size_t> used(size_t(config.num_layers), 0);
  size_t whole_bytes = 0, buffer_bytes = 0;
  int64_t largest = 1;
  for (const model::WeightSpec& spec : specs) {
    const std::optional<Tensor> present = gradient(spec);
    if (!present) continue;
    const Tensor& g = *present;
    if (spec.layer < 0) {
      whole_bytes += aligned(g.bytes());
      continue;
    }
    Slice s{.spec = spec, .numel = spec.numel(), .capacity = capacity_of(spec.numel(), world)};
    s.owned = owned_of(s.numel, world, comm.rank());
    size_t& buffer = used[size_t(spec.layer)];
    s.offset = buffer;
    buffer += aligned(size_t(s.capacity * world) * dtype_size(grad_dtype_));
    buffer_bytes = std::max(buffer_bytes, buffer);
    if (keep_slices_) whole_bytes += aligned(size_t(s.capacity) * dtype_size(grad_dtype_));
    largest = std::max(largest, s.capacity);
    by_layer_[size_t(spec.layer)].push_back(slices_.size());
    slices_.push_back(std::move(s));
  }
  // No layer tensor trained (zero3 with frozen layers only: a LoRA run's base): no buffer, no scratch, as
  // the footprint counts.
  const bool any = !slices_.empty();
  auto arena = std::make_unique<Arena>(
      "grads (layer slices)", ops::memory_resource(device),
      whole_bytes +
          (any ? 2 * aligned(buffer_bytes) + aligned(size_t(largest) * dtype_size(grad_dtype_)) : 0) +
          kAlignment);
  if (any) {
    // The buffers need no zeroing: receive zeroes a layer's gradient regions.
    for (void*& buffer : buffers_) buffer = arena->alloc_bytes("gradient buffer", buffer_bytes);
    scatter_scratch_ =
        flat(arena->alloc_bytes("reduce-scatter scratch", size_t(largest) * dtype_size(grad_dtype_)),
             grad_dtype_, largest, device);
  }
  model::ModelWeights g_new = grads;
  size_t next = 0;
  for (const model::WeightSpec& spec : specs) {
    const std::optional<Tensor> present = gradient(spec);
    if (!present) continue;
    const Tensor& g = *present;
    if (spec.layer < 0) {
      model::weight_of(g_new, spec) = moved(g, arena->alloc_bytes(spec.hf_name, g.bytes()));
      ops::copy(ctx_, model::weight_of(g_new, spec), g);
      continue;
    }
    Slice& s = slices_[next++];
    if (keep_slices_) {
      s.grad = flat(arena->alloc_bytes(spec.hf_name, size_t(s.capacity) * dtype_size(grad_dtype_)),
                    grad_dtype_, s.capacity, device);
      ops::zero(ctx_, s.grad);
    } else {
      s.grad = reduced_block(s, 0);  // where AdamW is bound until on_reduced hands it each layer's blocks
    }
    // Re-pointed at the buffer that receives the layer by each hook.
    model::weight_of(g_new, spec) = moved(g, static_cast<char*>(buffers_[0]) + s.offset);
  }
  model::bind_fused_parts(config, g_new);  // a fused weight's parts are views of its rows
  ops::synchronize(ctx_, device);          // the copies read the old arena, released below
  grads = g_new;
  grads_arena = std::move(arena);
}

Tensor LayerGradientShards::buffer_view(const Slice& s, int buffer) const {
  return flat(static_cast<char*>(buffers_[buffer]) + s.offset, grad_dtype_, s.capacity * comm_.world_size(),
              device_);
}

Tensor LayerGradientShards::reduced_block(const Slice& s, int buffer) const {
  const size_t begin = size_t(comm_.rank() * s.capacity) * dtype_size(grad_dtype_);
  return flat(static_cast<char*>(buffers_[buffer]) + s.offset + begin, grad_dtype_, s.capacity, device_);
}

void LayerGradientShards::send() {
  if (pending_ < 0) return;
  const int b = pending_buffer_;
  for (size_t i : by_layer_[size_t(pending_)]) {
    const Slice& s = slices_[i];
    if (overlap_) {
      // In place: this rank's block of the buffer receives the sum; complete() adds it to the slice.
      comm_.reduce_scatter_overlapped(buffer_view(s, b), reduced_block(s, b), dist::ReduceOp::Sum);
    } else {
      const Tensor part = flat(scatter_scratch_.data, grad_dtype_, s.capacity, device_);
      comm_.reduce_scatter(buffer_view(s, b), part, dist::ReduceOp::Sum);
      if (keep_slices_)
        ops::add_inplace(ctx_, s.grad, part);
      else  // the scratch is reused by the next tensor
        on_reduced_(std::span<const size_t>(&i, 1), std::span<const Tensor>(&part, 1));
    }
  }
  if (overlap_) {
    reducing_[b] = pending_;
    reduced_mark_[b] = comm_.overlapped_mark();
  }
  pending_ = -1;
}

void LayerGradientShards::complete(int buffer) {
  if (reducing_[buffer] < 0) return;
  // The compute stream waits for the buffer's reduce-scatter only (not for a gather issued after it).
  comm_.wait_overlapped_mark(reduced_mark_[buffer]);
  const std::vector<size_t>& layer = by_layer_[size_t(reducing_[buffer])];
  if (keep_slices_) {
    for (size_t i : layer) ops::add_inplace(ctx_, slices_[i].grad, reduced_block(slices_[i], buffer));
  } else {
    std::vector<Tensor> reduced;
    for (size_t i : layer) reduced.push_back(reduced_block(slices_[i], buffer));
    on_reduced_(layer, reduced);
  }
  reducing_[buffer] = -1;
}

void LayerGradientShards::receive(int64_t layer) {
  // The other buffer (the blocking path keeps one): the reduce-scatter that read it two hooks ago is
  // complete and added before the buffer is zeroed for this layer.
  const int b = overlap_ ? 1 - pending_buffer_ : 0;
  complete(b);
  for (size_t i : by_layer_[size_t(layer)]) {
    const Slice& s = slices_[i];
    model::weight_of(grads_, s.spec).data = static_cast<char*>(buffers_[b]) + s.offset;
    ops::zero(ctx_, buffer_view(s, b));
  }
  model::bind_fused_parts(config_, grads_);
  pending_ = layer;
  pending_buffer_ = b;
}

void LayerGradientShards::after_backward(int64_t layer) {
  if (layer >= 0 && !overlap_) send();
}

void LayerGradientShards::before_backward(int64_t layer) {
  // The same layer's next chunk adds to the buffer its gradient waits in (see the header).
  if (receiving(layer)) return;
  send();
  receive(layer);
}

model::LayerHooks LayerGradientShards::hooks() {
  return {.before_backward = [this](int64_t l) { before_backward(l); },
          .after_backward = [this](int64_t l) { after_backward(l); }};
}

void LayerGradientShards::begin_step(int64_t) {
  LT_CHECK(keep_slices_ || on_reduced_, "layer gradients without slices: no on_reduced to hand them to");
  if (keep_slices_)
    for (const Slice& s : slices_) ops::zero(ctx_, s.grad);
}

int64_t LayerGradientShards::round_chunks(int64_t mine) {
  if (layer_major_) return std::max<int64_t>(mine, 1);  // a layer's hooks in a row reduce it once
  return dist::max_over_ranks(comm_, mine);
}

void LayerGradientShards::pad_passes(int64_t passes) {
  // The backward's hook order (schedule_engine.cpp): every chunk runs the layers down.
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = config_.num_layers - 1; l >= 0; --l) before_backward(l);
}

void LayerGradientShards::finish_micro_batch() {
  send();
  complete(0);
  complete(1);
}

}  // namespace lt::train
