#include "train/zero3_layers.h"

#include <algorithm>

#include "core/error.h"
#include "ops/device.h"
#include "ops/ops.h"

namespace lt::train {
namespace {

constexpr size_t kAlignment = 256;  // the arena's default

size_t aligned(size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

int64_t capacity_of(int64_t n, int world) {
  return (n + world - 1) / world;
}

Tensor flat(void* data, DType dtype, int64_t n, Device device) {
  return Tensor(data, dtype, {n}, device);
}

// `like` (shape, dtype, device) at `data`.
Tensor moved(const Tensor& like, void* data) {
  Tensor t = like;
  t.data = data;
  return t;
}

bool sharded(const model::WeightSpec& spec, const model::ModelWeights& grads) {
  return spec.layer >= 0 && !model::weight_of(grads, spec).empty();
}

}  // namespace

bool Zero3Layers::shards_anything(const model::ModelConfig& config, const model::TrainableFn& trainable) {
  for (const model::WeightSpec& spec : model::weight_specs(config))
    if (spec.layer >= 0 && trainable(spec)) return true;
  return false;
}

Zero3Layers::Footprint Zero3Layers::footprint(const model::ModelConfig& config, DType dtype, DType grad_dtype,
                                              const model::TrainableFn& trainable, int world,
                                              std::optional<DType> master) {
  Footprint f;
  std::vector<size_t> slot(size_t(config.num_layers), 0), grad(size_t(config.num_layers), 0);
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (spec.layer < 0 || !trainable(spec)) continue;
    const int64_t c = capacity_of(spec.numel(), world);
    f.slices += aligned(size_t(c) * dtype_size(dtype));
    f.grad_slices += aligned(size_t(c) * dtype_size(grad_dtype));
    if (master) f.master_slices += aligned(size_t(c) * dtype_size(*master));
    slot[size_t(spec.layer)] += aligned(size_t(c * world) * dtype_size(dtype));
    grad[size_t(spec.layer)] += aligned(size_t(c * world) * dtype_size(grad_dtype));
    f.grad_buffer = std::max(f.grad_buffer, aligned(size_t(c) * dtype_size(grad_dtype)));  // scratch
  }
  f.slots = 2 * *std::max_element(slot.begin(), slot.end());
  f.grad_buffer += 2 * *std::max_element(grad.begin(), grad.end());
  return f;
}

Zero3Layers::Zero3Layers(const ops::Context& ctx, dist::Communicator& comm, const model::ModelConfig& config,
                         model::ModelWeights& weights, std::unique_ptr<Arena>& weights_arena,
                         model::ModelWeights& grads, std::unique_ptr<Arena>& grads_arena, bool overlap,
                         const MasterSlices& masters, bool gradient_slices)
    : ctx_(ctx),
      comm_(comm),
      config_(config),
      weights_(weights),
      grads_(grads),
      grad_dtype_(grads.dtype),
      overlap_(overlap),
      gradient_slices_(gradient_slices) {
  const int world = comm.world_size();
  const DType dtype = weights.dtype;
  const Device device = weights_arena->device();
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  by_layer_.resize(size_t(config.num_layers));
  std::vector<size_t> slot_used(size_t(config.num_layers), 0), grad_used(size_t(config.num_layers), 0);
  size_t weight_bytes = 0, grad_bytes = 0, slot_bytes = 0, buffer_bytes = 0;
  int64_t largest = 1;
  for (const model::WeightSpec& spec : specs) {
    const Tensor& w = model::weight_of(weights, spec);
    const Tensor& g = model::weight_of(grads, spec);
    if (!sharded(spec, grads)) {
      if (!w.empty()) weight_bytes += aligned(w.bytes());
      if (!g.empty()) grad_bytes += aligned(g.bytes());
      continue;
    }
    Shard s{.spec = spec, .numel = spec.numel(), .capacity = capacity_of(spec.numel(), world)};
    s.owned = std::clamp<int64_t>(s.numel - comm.rank() * s.capacity, 0, s.capacity);
    size_t& slot = slot_used[size_t(spec.layer)];
    size_t& buffer = grad_used[size_t(spec.layer)];
    s.slot_offset = slot;
    s.grad_offset = buffer;
    slot += aligned(size_t(s.capacity * world) * dtype_size(dtype));
    buffer += aligned(size_t(s.capacity * world) * dtype_size(grad_dtype_));
    slot_bytes = std::max(slot_bytes, slot);
    buffer_bytes = std::max(buffer_bytes, buffer);
    weight_bytes += aligned(size_t(s.capacity) * dtype_size(dtype));
    if (gradient_slices_) grad_bytes += aligned(size_t(s.capacity) * dtype_size(grad_dtype_));
    largest = std::max(largest, s.capacity);
    by_layer_[size_t(spec.layer)].push_back(shards_.size());
    shards_.push_back(std::move(s));
  }
  MemoryResource& memory = ops::memory_resource(device);
  auto new_weights = std::make_unique<Arena>("weights (zero3 slices)", memory,
                                             weight_bytes + 2 * aligned(slot_bytes) + kAlignment);
  auto new_grads =
      std::make_unique<Arena>("grads (zero3 slices)", memory,
                              grad_bytes + 2 * aligned(buffer_bytes) +
                                  aligned(size_t(largest) * dtype_size(grad_dtype_)) + kAlignment);
  // Neither needs zeroing: a gather writes a tensor's whole region (the slices' padding is zero), and
  // before_backward zeroes a layer's gradient regions.
  for (void*& slot : slots_)
    slot = new_weights->alloc_bytes("zero3 gather slot", std::max<size_t>(slot_bytes, 1));
  for (void*& buffer : grad_buffers_)
    buffer = new_grads->alloc_bytes("zero3 gradient buffer", std::max<size_t>(buffer_bytes, 1));
  scatter_scratch_ =
      flat(new_grads->alloc_bytes("zero3 reduce-scatter scratch", size_t(largest) * dtype_size(grad_dtype_)),
           grad_dtype_, largest, device);
  // Every tensor moves: the slices are cut from the whole tensors, the others copied whole.
  model::ModelWeights w_new = weights, g_new = grads;
  size_t next = 0;
  for (const model::WeightSpec& spec : specs) {
    const Tensor& w = model::weight_of(weights, spec);
    const Tensor& g = model::weight_of(grads, spec);
    if (!sharded(spec, grads)) {
      if (!w.empty()) {
        model::weight_of(w_new, spec) = moved(w, new_weights->alloc_bytes(spec.hf_name, w.bytes()));
        ops::copy(ctx_, model::weight_of(w_new, spec), w);
      }
      if (!g.empty()) {
        model::weight_of(g_new, spec) = moved(g, new_grads->alloc_bytes(spec.hf_name, g.bytes()));
        ops::copy(ctx_, model::weight_of(g_new, spec), g);
      }
      continue;
    }
    Shard& s = shards_[next++];
    s.param = flat(new_weights->alloc_bytes(spec.hf_name, size_t(s.capacity) * dtype_size(dtype)), dtype,
                   s.capacity, device);
    if (gradient_slices_) {
      s.grad = flat(new_grads->alloc_bytes(spec.hf_name, size_t(s.capacity) * dtype_size(grad_dtype_)),
                    grad_dtype_, s.capacity, device);
      ops::zero(ctx_, s.grad);
    } else {
      s.grad = reduced_block(s, 0);  // where AdamW is bound until on_reduced hands it each layer's blocks
    }
    ops::zero(ctx_, s.param);
    if (masters) {
      s.master = masters(spec.hf_name);
      LT_CHECK(s.master.numel() == s.capacity, "zero3: the master slice of '{}' has {} elements, not {}",
               spec.hf_name, s.master.numel(), s.capacity);
    }
    if (s.owned > 0) {
      const size_t begin = size_t(comm.rank() * s.capacity) * dtype_size(dtype);
      ops::copy(ctx_, flat(s.param.data, dtype, s.owned, device),
                flat(static_cast<char*>(w.data) + begin, dtype, s.owned, device));
    }
    // Re-pointed at the slot that holds the layer (acquire) and at its gradient buffer (before_backward) by
    // each hook.
    model::weight_of(w_new, spec) = moved(w, static_cast<char*>(slots_[0]) + s.slot_offset);
    model::weight_of(g_new, spec) = moved(g, static_cast<char*>(grad_buffers_[0]) + s.grad_offset);
  }
  ops::synchronize(ctx_, device);  // the copies read the old arenas, released below
  weights = w_new;
  grads = g_new;
  weights_arena = std::move(new_weights);
  grads_arena = std::move(new_grads);
}

Tensor Zero3Layers::slot_view(const Shard& s, int slot) const {
  return flat(static_cast<char*>(slots_[slot]) + s.slot_offset, weights_.dtype,
              s.capacity * comm_.world_size(), s.param.device);
}

Tensor Zero3Layers::grad_view(const Shard& s, int buffer) const {
  return flat(static_cast<char*>(grad_buffers_[buffer]) + s.grad_offset, grad_dtype_,
              s.capacity * comm_.world_size(), s.grad.device);
}

Tensor Zero3Layers::reduced_block(const Shard& s, int buffer) const {
  const size_t begin = size_t(comm_.rank() * s.capacity) * dtype_size(grad_dtype_);
  return flat(static_cast<char*>(grad_buffers_[buffer]) + s.grad_offset + begin, grad_dtype_, s.capacity,
              s.param.device);
}

int Zero3Layers::slot_holding(int64_t layer) const {
  for (int s = 0; s < 2; ++s)
    if (slot_layer_[s] == layer) return s;
  return -1;
}

void Zero3Layers::issue_gather(int64_t layer, int slot, bool overlapped) {
  for (size_t i : by_layer_[size_t(layer)]) {
    const Shard& s = shards_[i];
    if (overlapped)
      comm_.all_gather_overlapped(s.param, slot_view(s, slot));
    else
      comm_.all_gather(s.param, slot_view(s, slot));
  }
  slot_layer_[slot] = layer;
  slot_pending_[slot] = overlapped;
}

// Every decision below depends only on the hook sequence, the round's chunk count and the step's round
// count, which are the same on every rank: so every rank issues the same gathers in the same order.
void Zero3Layers::acquire(int64_t layer, int64_t next) {
  prefetch(next, take(layer));
}

int Zero3Layers::take(int64_t layer) {
  int slot = slot_holding(layer);
  if (slot < 0) {
    // Not prefetched (the step's first layer, or a hook the prediction missed): gathered now, into the
    // slot the latest layer does not use. A gather still running into it comes first on the communicator's
    // stream, and the compute stream waits for this one.
    slot = current_slot_ == 0 ? 1 : 0;
    issue_gather(layer, slot, false);
  } else if (slot_pending_[slot]) {
    comm_.wait_overlapped();  // the compute stream waits for the prefetch (and anything issued before it)
    slot_pending_[0] = slot_pending_[1] = false;
  }
  for (size_t i : by_layer_[size_t(layer)]) {
    const Shard& s = shards_[i];
    model::weight_of(weights_, s.spec).data = static_cast<char*>(slots_[slot]) + s.slot_offset;
  }
  current_slot_ = slot;
  return slot;
}

void Zero3Layers::prefetch(int64_t next, int taken) {
  // The next layer into the other slot, on the communicator's stream while this layer computes. The other
  // slot's layer ran before this hook: the gather waits for the compute work queued so far (NCCL:
  // Communicator's ordering by events), so it never overwrites weights a queued kernel still reads.
  if (overlap_ && next >= 0 && slot_holding(next) < 0) issue_gather(next, 1 - taken, true);
}

int64_t Zero3Layers::next_after_forward(int64_t layer) {
  const int64_t L = config_.num_layers;
  if (layer + 1 < L) return layer + 1;
  ++forward_passes_;
  return forward_passes_ < round_passes_ ? 0 : L - 1;  // the next chunk's forward, or the backward's start
}

int64_t Zero3Layers::next_after_backward(int64_t layer) {
  if (layer > 0) return layer - 1;
  ++backward_passes_;
  if (backward_passes_ < round_passes_) return config_.num_layers - 1;  // the previous chunk's backward
  // The step's next round starts with layer 0; after the step's last round the optimizer changes the
  // weights first, so nothing is gathered ahead.
  return rounds_left_ > 1 ? 0 : -1;
}

void Zero3Layers::before_forward(int64_t layer) {
  acquire(layer, next_after_forward(layer));
}

void Zero3Layers::flush() {
  if (pending_ < 0) return;
  const int b = pending_buffer_;
  for (size_t i : by_layer_[size_t(pending_)]) {
    const Shard& s = shards_[i];
    if (overlap_) {
      // In place: this rank's block of the buffer receives the sum; complete() adds it to the slice.
      comm_.reduce_scatter_overlapped(grad_view(s, b), reduced_block(s, b), dist::ReduceOp::Sum);
    } else {
      const Tensor part = flat(scatter_scratch_.data, grad_dtype_, s.capacity, s.grad.device);
      comm_.reduce_scatter(grad_view(s, b), part, dist::ReduceOp::Sum);
      if (gradient_slices_)
        ops::add_inplace(ctx_, s.grad, part);
      else
        on_reduced_(std::span<const size_t>(&i, 1),
                    std::span<const Tensor>(&part, 1));  // scratch reused next
    }
  }
  if (overlap_) {
    reducing_[b] = pending_;
    reduced_mark_[b] = comm_.overlapped_mark();
  }
  pending_ = -1;
}

void Zero3Layers::complete(int buffer) {
  if (reducing_[buffer] < 0) return;
  // The compute stream waits for the buffer's reduce-scatter only (not for a gather issued after it).
  comm_.wait_overlapped_mark(reduced_mark_[buffer]);
  const std::vector<size_t>& layer = by_layer_[size_t(reducing_[buffer])];
  if (gradient_slices_) {
    for (size_t i : layer) ops::add_inplace(ctx_, shards_[i].grad, reduced_block(shards_[i], buffer));
  } else {
    std::vector<Tensor> reduced;
    for (size_t i : layer) reduced.push_back(reduced_block(shards_[i], buffer));
    on_reduced_(layer, reduced);
  }
  reducing_[buffer] = -1;
}

void Zero3Layers::point_grads(int64_t layer, int buffer) {
  for (size_t i : by_layer_[size_t(layer)]) {
    const Shard& s = shards_[i];
    model::weight_of(grads_, s.spec).data = static_cast<char*>(grad_buffers_[buffer]) + s.grad_offset;
  }
}

void Zero3Layers::before_backward(int64_t layer) {
  if (layer == pending_) {
    // The same layer's next chunk (layer-major, or a one-layer model): its gradient adds to the buffer it
    // waits in, reduced once with the others (zero3_layers.h). Nothing new is gathered or reduced.
    prefetch(next_after_backward(layer), take(layer));
    return;
  }
  // Wait for this layer's gather first: it is the latest overlapped collective, so the wait covers
  // nothing issued after it (zero3_layers.h). Then the previous layer's (or chunk's) gradient leaves its
  // buffer, and the next layer's gather follows it on the communicator's stream.
  const int slot = take(layer);
  flush();
  prefetch(next_after_backward(layer), slot);
  // The other buffer (the blocking path keeps one): the reduce-scatter that read it two hooks ago is
  // complete and added before the buffer is zeroed for this layer.
  const int b = overlap_ ? 1 - pending_buffer_ : 0;
  complete(b);
  point_grads(layer, b);
  for (size_t i : by_layer_[size_t(layer)]) ops::zero(ctx_, grad_view(shards_[i], b));
  pending_ = layer;
  pending_buffer_ = b;
}

model::LayerHooks Zero3Layers::hooks() {
  // Overlapped, a layer's reduce-scatter waits for the next hook: issued here, before the next layer's
  // gather wait, that wait would cover it.
  return {.before_forward = [this](int64_t l) { before_forward(l); },
          .before_backward = [this](int64_t l) { before_backward(l); },
          .after_backward =
              [this](int64_t l) {
                if (l >= 0 && !overlap_) flush();
              }};
}

model::LayerHooks Zero3Layers::evaluation_hooks() {
  return {.before_forward = [this](int64_t l) { acquire(l, (l + 1) % config_.num_layers); }};
}

int64_t Zero3Layers::evaluation_round_passes(int64_t mine) {
  if (layer_major_) return std::max<int64_t>(mine, 1);  // the same gathers for any chunk count
  double own = double(mine);
  std::vector<double> all(size_t(comm_.world_size()), 0.0);
  comm_.all_gather(Tensor(&own, DType::F64, {1}), Tensor(all.data(), DType::F64, {int64_t(all.size())}));
  return int64_t(*std::max_element(all.begin(), all.end()));
}

void Zero3Layers::pad_evaluation(int64_t passes) {
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = 0; l < config_.num_layers; ++l) acquire(l, (l + 1) % config_.num_layers);
}

void Zero3Layers::begin_step(int64_t rounds) {
  LT_CHECK(gradient_slices_ || on_reduced_, "zero3 without gradient slices: no on_reduced to hand them to");
  if (gradient_slices_)
    for (const Shard& s : shards_) ops::zero(ctx_, s.grad);
  rounds_left_ = rounds;
}

int64_t Zero3Layers::round_chunks(int64_t mine) {
  forward_passes_ = backward_passes_ = 0;
  if (layer_major_) {
    round_passes_ = 1;  // the layers' order: up once, down once (the predictions below)
    return std::max<int64_t>(mine, 1);
  }
  double own = double(mine);
  std::vector<double> all(size_t(comm_.world_size()), 0.0);
  comm_.all_gather(Tensor(&own, DType::F64, {1}), Tensor(all.data(), DType::F64, {int64_t(all.size())}));
  round_passes_ = int64_t(*std::max_element(all.begin(), all.end()));
  forward_passes_ = backward_passes_ = 0;
  return round_passes_;
}

void Zero3Layers::pad_passes(int64_t passes) {
  // The hooks' order in the schedule (schedule_engine.cpp): every chunk's forward runs the layers up, every
  // chunk's backward runs them down.
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = 0; l < config_.num_layers; ++l) before_forward(l);
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = config_.num_layers - 1; l >= 0; --l) before_backward(l);
}

void Zero3Layers::pad_round(int64_t passes) {
  pad_passes(passes);
  finish_micro_batch();
}

void Zero3Layers::finish_micro_batch() {
  flush();
  complete(0);
  complete(1);
  rounds_left_ = std::max<int64_t>(rounds_left_ - 1, 1);
}

void Zero3Layers::weights_changed() {
  // A prefetch the prediction wasted may still run: the next gather into its slot comes after it on the
  // communicator's stream.
  slot_layer_[0] = slot_layer_[1] = -1;
}

model::HostWeights Zero3Layers::gather_whole_on_host(bool keep) {
  const model::ModelWeights& from = weights_;
  const int64_t world = comm_.world_size();
  size_t largest = 0;
  for (const Shard& s : shards_)
    largest = std::max(largest, size_t(s.capacity * world) * dtype_size(s.param.dtype));
  const Device device = shards_.empty() ? from.embed.device : shards_.front().param.device;  // the slices'
  Arena staging("zero3 gathered tensor", ops::memory_resource(device), largest + kAlignment);
  void* gathered = staging.alloc_bytes("zero3 gathered tensor", std::max<size_t>(largest, 1));
  model::HostWeights host;
  if (keep) host = model::host_allocation(config_, from.dtype);
  std::vector<const Shard*> shard_of_spec;  // weight_specs order: the shard of each spec, or nullptr
  const std::vector<model::WeightSpec> specs = model::weight_specs(config_);
  for (const model::WeightSpec& spec : specs) {
    const auto s = std::find_if(shards_.begin(), shards_.end(),
                                [&](const Shard& sh) { return sh.spec.hf_name == spec.hf_name; });
    shard_of_spec.push_back(s == shards_.end() ? nullptr : &*s);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const Tensor dst = keep ? model::weight_of(host.weights, specs[i]) : Tensor();
    const Shard* s = shard_of_spec[i];
    if (s == nullptr) {
      const Tensor& src = model::weight_of(from, specs[i]);
      if (!dst.empty() && !src.empty()) ops::copy(ctx_, dst, src);
      continue;
    }
    const Tensor& slice = s->param;
    comm_.all_gather(slice, flat(gathered, slice.dtype, s->capacity * world, device));
    // The first n of the world * c gathered elements are the tensor (the last slice is padded).
    if (!dst.empty())
      ops::copy(ctx_, dst.reshaped({s->numel}), flat(gathered, slice.dtype, s->numel, device));
  }
  return host;
}

}  // namespace lt::train
