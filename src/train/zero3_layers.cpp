#include "train/zero3_layers.h"

#include <algorithm>

#include "core/error.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "train/slice_layout.h"

namespace lt::train {
using namespace slice_layout;
namespace {

bool trained(const model::WeightSpec& spec, const model::ModelWeights& grads) {
  return spec.layer >= 0 && !model::weight_of(grads, spec).empty();
}

}  // namespace

bool Zero3Layers::shards_anything(const model::ModelConfig& config, const model::TrainableFn& trainable,
                                  bool frozen) {
  if (frozen)
    for (const model::WeightSpec& spec : model::weight_specs(config))
      if (spec.layer >= 0) return true;
  return LayerGradientShards::slices_anything(config, trainable);
}

Zero3Layers::Footprint Zero3Layers::footprint(const model::ModelConfig& config, DType dtype, DType grad_dtype,
                                              const model::TrainableFn& trainable, int world,
                                              std::optional<DType> master, bool frozen) {
  const LayerGradientShards::Footprint gradients =
      LayerGradientShards::footprint(config, grad_dtype, trainable, world);
  Footprint f{.grad_slices = gradients.slices, .grad_buffer = gradients.buffers};
  std::vector<size_t> slot(size_t(config.num_layers), 0);
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    const bool trains = trainable(spec);
    if (spec.layer < 0 || (!trains && !frozen)) continue;
    const int64_t c = capacity_of(spec.numel(), world);
    f.slices += aligned(size_t(c) * dtype_size(dtype));
    if (!trains) f.frozen_slices += aligned(size_t(c) * dtype_size(dtype));
    if (master && trains) f.master_slices += aligned(size_t(c) * dtype_size(*master));
    slot[size_t(spec.layer)] += aligned(size_t(c * world) * dtype_size(dtype));
  }
  f.slots = 2 * *std::max_element(slot.begin(), slot.end());
  return f;
}

Zero3Layers::Zero3Layers(const ops::Context& ctx, dist::Communicator& comm, const model::ModelConfig& config,
                         model::ModelWeights& weights, std::unique_ptr<Arena>& weights_arena,
                         model::ModelWeights& grads, std::unique_ptr<Arena>& grads_arena, bool overlap,
                         const MasterSlices& masters, bool gradient_slices, bool frozen,
                         const Zero3Slices* loaded)
    : ctx_(ctx),
      comm_(comm),
      config_(config),
      weights_(weights),
      // The gradients first: their arena is rebuilt with the slices (the layer tensors' gradients stay
      // non-empty, which says below which tensors are sharded); the loaded slices' gradients are made as
      // slices directly.
      gradients_(ctx, comm, config, grads, grads_arena, overlap, gradient_slices,
                 loaded ? model::TrainableFn([loaded](const model::WeightSpec& spec) {
                   return loaded->slices.count(spec.hf_name) > 0;
                 })
                        : model::TrainableFn()),
      overlap_(overlap) {
  LT_CHECK(!loaded || (loaded->world == comm.world_size() && loaded->rank == comm.rank()),
           "zero3: slices loaded for rank {} of {}, but this is rank {} of {}", loaded ? loaded->rank : 0,
           loaded ? loaded->world : 0, comm.rank(), comm.world_size());
  const int world = comm.world_size();
  const DType dtype = weights.dtype;
  const Device device = weights_arena->device();
  const std::vector<model::WeightSpec> specs = model::weight_specs(config);
  by_layer_.resize(size_t(config.num_layers));
  std::vector<size_t> slot_used(size_t(config.num_layers), 0);
  size_t weight_bytes = 0, slot_bytes = 0;
  // A frozen layer tensor loaded as this rank's slice (the sliced load), or nullptr.
  auto loaded_frozen = [&](const model::WeightSpec& spec) -> const Tensor* {
    if (!loaded) return nullptr;
    const auto it = loaded->frozen.find(spec.hf_name);
    return it == loaded->frozen.end() ? nullptr : &it->second;
  };
  // Sharded: a trained layer tensor, or (`frozen`) a frozen one the weights hold or the load sliced.
  auto sharded = [&](const model::WeightSpec& spec) {
    return trained(spec, grads) ||
           (frozen && spec.layer >= 0 &&
            (!model::weight_of(weights, spec).empty() || loaded_frozen(spec) != nullptr));
  };
  for (const model::WeightSpec& spec : specs) {
    const Tensor& w = model::weight_of(weights, spec);
    if (!sharded(spec)) {
      if (!w.empty()) weight_bytes += aligned(w.bytes());
      continue;
    }
    Shard s{.spec = spec, .numel = spec.numel(), .capacity = capacity_of(spec.numel(), world)};
    s.owned = owned_of(s.numel, world, comm.rank());
    size_t& slot = slot_used[size_t(spec.layer)];
    s.slot_offset = slot;
    slot += aligned(size_t(s.capacity * world) * dtype_size(dtype));
    slot_bytes = std::max(slot_bytes, slot);
    weight_bytes += aligned(size_t(s.capacity) * dtype_size(dtype));
    if (!trained(spec, grads)) {
      frozen_.push_back(std::move(s));
      continue;
    }
    s.grad = gradients_.slices()[shards_.size()].grad;  // the same tensors in the same order
    shards_.push_back(std::move(s));
  }
  for (const std::vector<Shard>* kind : {&shards_, &frozen_})  // complete: the addresses stay
    for (const Shard& s : *kind) by_layer_[size_t(s.spec.layer)].push_back(&s);
  MemoryResource& memory = ops::memory_resource(device);
  auto new_weights = std::make_unique<Arena>("weights (zero3 slices)", memory,
                                             weight_bytes + 2 * aligned(slot_bytes) + kAlignment);
  // No need for zeroing: a gather writes a tensor's whole region (the slices' padding is zero).
  for (void*& slot : slots_)
    slot = new_weights->alloc_bytes("zero3 gather slot", std::max<size_t>(slot_bytes, 1));
  // Every tensor moves: the slices are cut from the whole tensors, the others copied whole.
  model::ModelWeights w_new = weights;
  size_t next_trained = 0, next_frozen = 0;
  for (const model::WeightSpec& spec : specs) {
    const Tensor& w = model::weight_of(weights, spec);
    if (!sharded(spec)) {
      if (!w.empty()) {
        model::weight_of(w_new, spec) = moved(w, new_weights->alloc_bytes(spec.hf_name, w.bytes()));
        ops::copy(ctx_, model::weight_of(w_new, spec), w);
      }
      continue;
    }
    Shard& s = trained(spec, grads) ? shards_[next_trained++] : frozen_[next_frozen++];
    s.param = flat(new_weights->alloc_bytes(spec.hf_name, size_t(s.capacity) * dtype_size(dtype)), dtype,
                   s.capacity, device);
    const Tensor* from = nullptr;  // this rank's slice as the sliced load made it
    if (loaded) {
      const auto it = loaded->slices.find(spec.hf_name);
      from = it != loaded->slices.end() ? &it->second : loaded_frozen(spec);
    }
    if (from) {
      LT_CHECK(w.empty() && from->numel() == s.capacity && from->dtype == dtype,
               "zero3: the loaded slice of '{}' is {} {} elements (expected {} {}, and no whole tensor)",
               spec.hf_name, from->numel(), dtype_name(from->dtype), s.capacity, dtype_name(dtype));
      ops::copy(ctx_, s.param, *from);  // zero-padded already
    } else {
      ops::zero(ctx_, s.param);  // the padding past the slice gathers as zeros
      copy_own_slice(ctx_, w, s.param, world, comm.rank());
    }
    // Re-pointed at the slot that holds the layer by each hook (acquire).
    Tensor shape = model::spec_view(spec, nullptr, dtype);
    shape.device = device;
    model::weight_of(w_new, spec) = moved(shape, static_cast<char*>(slots_[0]) + s.slot_offset);
  }
  if (masters) set_master_slices(masters);
  ops::synchronize(ctx_, device);  // the copies read the old arenas, released below
  model::bind_fused_parts(config, w_new);
  weights = w_new;
  weights_arena = std::move(new_weights);
}

void Zero3Layers::set_master_slices(const MasterSlices& masters) {
  for (Shard& s : shards_) {
    s.master = masters(s.spec.hf_name);
    LT_CHECK(s.master.numel() == s.capacity, "zero3: the master slice of '{}' has {} elements, not {}",
             s.spec.hf_name, s.master.numel(), s.capacity);
  }
}

Tensor Zero3Layers::slot_view(const Shard& s, int slot) const {
  return flat(static_cast<char*>(slots_[slot]) + s.slot_offset, weights_.dtype,
              s.capacity * comm_.world_size(), s.param.device);
}

int Zero3Layers::slot_holding(int64_t layer) const {
  for (int s = 0; s < 2; ++s)
    if (slot_layer_[s] == layer) return s;
  return -1;
}

void Zero3Layers::issue_gather(int64_t layer, int slot, bool overlapped) {
  for (const Shard* shard : by_layer_[size_t(layer)]) {
    const Shard& s = *shard;
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
  for (const Shard* s : by_layer_[size_t(layer)]) {
    model::weight_of(weights_, s->spec).data = static_cast<char*>(slots_[slot]) + s->slot_offset;
  }
  model::bind_fused_parts(config_, weights_);  // a fused weight's parts are views of its rows
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

void Zero3Layers::before_backward(int64_t layer) {
  if (gradients_.receiving(layer)) {
    // The same layer's next chunk (layer-major, or a one-layer model): its gradient adds to the buffer it
    // waits in, reduced once with the others (zero3_layers.h). Nothing new is gathered or reduced.
    prefetch(next_after_backward(layer), take(layer));
    return;
  }
  // Wait for this layer's gather first: it is the latest overlapped collective, so the wait covers
  // nothing issued after it (zero3_layers.h). Then the previous layer's (or chunk's) gradient leaves its
  // buffer, and the next layer's gather follows it on the communicator's stream.
  const int slot = take(layer);
  gradients_.send();
  prefetch(next_after_backward(layer), slot);
  gradients_.receive(layer);
}

model::LayerHooks Zero3Layers::hooks() {
  // Overlapped, a layer's reduce-scatter waits for the next hook: issued here, before the next layer's
  // gather wait, that wait would cover it.
  return {.before_forward = [this](int64_t l) { before_forward(l); },
          .before_backward = [this](int64_t l) { before_backward(l); },
          .after_backward = [this](int64_t l) { gradients_.after_backward(l); }};
}

model::LayerHooks Zero3Layers::evaluation_hooks() {
  return {.before_forward = [this](int64_t l) { acquire(l, (l + 1) % config_.num_layers); }};
}

int64_t Zero3Layers::evaluation_round_passes(int64_t mine) {
  if (layer_major_) return std::max<int64_t>(mine, 1);  // the same gathers for any chunk count
  return dist::max_over_ranks(comm_, mine);
}

void Zero3Layers::pad_evaluation(int64_t passes) {
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = 0; l < config_.num_layers; ++l) acquire(l, (l + 1) % config_.num_layers);
}

void Zero3Layers::begin_step(int64_t rounds) {
  gradients_.begin_step(rounds);
  rounds_left_ = rounds;
}

int64_t Zero3Layers::round_chunks(int64_t mine) {
  forward_passes_ = backward_passes_ = 0;
  const int64_t chunks = gradients_.round_chunks(mine);
  // Layer-major, the layers' order is up once, down once (the predictions above).
  round_passes_ = layer_major_ ? 1 : chunks;
  return chunks;
}

void Zero3Layers::pad_passes(int64_t passes) {
  // The hooks' order in the schedule (schedule_engine.cpp): every chunk's forward runs the layers up, every
  // chunk's backward runs them down.
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = 0; l < config_.num_layers; ++l) before_forward(l);
  for (int64_t p = 0; p < passes; ++p)
    for (int64_t l = config_.num_layers - 1; l >= 0; --l) before_backward(l);
}

void Zero3Layers::finish_micro_batch() {
  gradients_.finish_micro_batch();
  rounds_left_ = std::max<int64_t>(rounds_left_ - 1, 1);
}

void Zero3Layers::weights_changed() {
  // A prefetch the prediction wasted may still run: the next gather into its slot comes after it on the
  // communicator's stream.
  slot_layer_[0] = slot_layer_[1] = -1;
}

size_t Zero3Layers::largest_gathered_bytes() const {
  size_t largest = 0;
  for (const std::vector<Shard>* kind : {&shards_, &frozen_})
    for (const Shard& s : *kind)
      largest = std::max(largest, size_t(s.capacity * comm_.world_size()) * dtype_size(s.param.dtype));
  return largest;
}

const Zero3Layers::Shard* Zero3Layers::shard_named(const std::string& name) const {
  for (const std::vector<Shard>* kind : {&shards_, &frozen_})
    for (const Shard& s : *kind)
      if (s.spec.hf_name == name) return &s;
  return nullptr;
}

void Zero3Layers::gather_into(const Shard& s, void* staging, const Tensor& into) {
  const Tensor& slice = s.param;
  comm_.all_gather(slice, flat(staging, slice.dtype, s.capacity * comm_.world_size(), slice.device));
  // The first n of the world * c gathered elements are the tensor (the last slice is padded).
  if (!into.empty())
    ops::copy(ctx_, into.reshaped({s.numel}), flat(staging, slice.dtype, s.numel, slice.device));
}

bool Zero3Layers::gather_tensor(const std::string& name, const Tensor& into) {
  const Shard* s = shard_named(name);
  if (s == nullptr) return false;
  const size_t bytes = size_t(s->capacity * comm_.world_size()) * dtype_size(s->param.dtype);
  Arena staging("zero3 gathered tensor", ops::memory_resource(s->param.device), bytes + kAlignment);
  gather_into(*s, staging.alloc_bytes("zero3 gathered tensor", std::max<size_t>(bytes, 1)), into);
  ops::synchronize(ctx_, s->param.device);  // the copy reads the staging, released below
  return true;
}

model::HostWeights Zero3Layers::gather_whole_on_host(bool keep) {
  const model::ModelWeights& from = weights_;
  const size_t largest = largest_gathered_bytes();
  const Device device = shards_.empty() ? (frozen_.empty() ? from.embed.device : frozen_.front().param.device)
                                        : shards_.front().param.device;  // the slices'
  Arena staging("zero3 gathered tensor", ops::memory_resource(device), largest + kAlignment);
  void* gathered = staging.alloc_bytes("zero3 gathered tensor", std::max<size_t>(largest, 1));
  model::HostWeights host;
  if (keep) host = model::host_allocation(config_, from.dtype);
  for (const model::WeightSpec& spec : model::weight_specs(config_)) {
    const Tensor dst = keep ? model::weight_of(host.weights, spec) : Tensor();
    if (const Shard* s = shard_named(spec.hf_name)) {
      gather_into(*s, gathered, dst);
      continue;
    }
    const Tensor& src = model::weight_of(from, spec);
    if (!dst.empty() && !src.empty()) ops::copy(ctx_, dst, src);
  }
  return host;
}

}  // namespace lt::train
