#include "train/data_parallel.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "train/checkpoint.h"
#include "train/grad_clip.h"
#include "train/loss_scaler.h"

namespace lt::train {
namespace {

constexpr size_t kWidestElement = 8;  // f64
constexpr size_t kAlignment = 256;    // the arena's default

// Elements [begin, end) of t, as a 1-D view.
Tensor flat_range(const Tensor& t, int64_t begin, int64_t end) {
  return Tensor(static_cast<char*>(t.data) + size_t(begin) * dtype_size(t.dtype), t.dtype, {end - begin},
                t.device);
}

Tensor flat(const Tensor& t) {
  return flat_range(t, 0, t.numel());
}

}  // namespace

DataParallel::DataParallel(const ops::Context& ctx, dist::Communicator& comm, dist::Sharding sharding,
                           std::vector<ParamGroup> full, MemoryResource& memory, bool overlap_gathers)
    : ctx_(ctx), comm_(comm), sharding_(sharding), full_(std::move(full)), overlap_gathers_(overlap_gathers) {
  int64_t layers = 0;
  for (const ParamGroup& g : full_) layers = std::max(layers, g.layer + 1);
  unready_.resize(size_t(layers));
  layer_mark_.assign(size_t(layers), 0);
  layer_shard_.assign(full_.size(), nullptr);
  grad_slice_.assign(full_.size(), Tensor{});
  master_slice_.assign(full_.size(), Tensor{});
  for (size_t i = 0; i < full_.size(); ++i) mine_.push_back(slice_of(i, comm_.rank()));
  if (comm_.world_size() > 1 && sharding_ != dist::Sharding::Zero3)
    buckets_ =
        std::make_unique<GradientBuckets>(comm_, full_,
                                          reduce_scatters() ? GradientBuckets::Collective::ReduceScatter
                                                            : GradientBuckets::Collective::AllReduce);
  if (!shards_optimizer()) return;
  int64_t largest = 1;
  for (const ParamGroup& g : full_) largest = std::max(largest, g.param.numel());
  const int world = comm_.world_size();
  const size_t part_bytes = scratch_bytes(largest, world) / size_t(world + 1);
  scratch_ = std::make_unique<Arena>("sharding scratch", memory, scratch_bytes(largest, world) + kAlignment);
  part_ = scratch_->alloc_bytes("slice", part_bytes, kAlignment);
  whole_ = scratch_->alloc_bytes("whole", part_bytes * size_t(world), kAlignment);
}

size_t DataParallel::scratch_bytes(int64_t largest_elements, int world) {
  const size_t part = size_t((largest_elements + world - 1) / world) * kWidestElement;
  return part * size_t(world + 1);  // a padded slice and a padded whole
}

int64_t DataParallel::slice_capacity(size_t index) const {
  const int64_t world = comm_.world_size();
  return (full_[index].param.numel() + world - 1) / world;
}

DataParallel::Slice DataParallel::slice_of(size_t index, int rank) const {
  const int64_t n = full_[index].param.numel(), c = slice_capacity(index);
  return {std::min(n, rank * c), std::min(n, (rank + 1) * c)};
}

Tensor DataParallel::part_scratch(size_t index, DType dtype) const {
  return Tensor(part_, dtype, {slice_capacity(index)}, scratch_->device());
}

Tensor DataParallel::whole_scratch(size_t index, DType dtype) const {
  return Tensor(whole_, dtype, {slice_capacity(index) * comm_.world_size()}, scratch_->device());
}

std::vector<ParamGroup> DataParallel::optimizer_groups() const {
  if (!shards_optimizer()) return full_;
  std::vector<ParamGroup> out;
  for (size_t i = 0; i < full_.size(); ++i) {
    const auto [begin, end] = mine_[i];
    if (begin == end) continue;  // a tensor smaller than the world: the lower ranks own it
    const ParamGroup& g = full_[i];
    if (const Zero3Layers::Shard* s = layer_shard_[i]) {
      // With master weights AdamW updates the master slice and rounds it into the compute slice.
      const bool masters = !s->master.empty();
      out.push_back({.name = g.name,
                     .param = flat_range(masters ? s->master : s->param, 0, s->owned),
                     .grad = flat_range(s->grad, 0, s->owned),
                     .compute_copy = masters ? flat_range(s->param, 0, s->owned) : Tensor{}});
      continue;
    }
    const Tensor grad =
        sliced(i) ? flat_range(grad_slice_[i], 0, end - begin) : flat_range(g.grad, begin, end);
    if (!master_slice_[i].empty()) {
      // The master of the slice, rounded by AdamW into the working weight's slice.
      out.push_back({.name = g.name,
                     .param = flat_range(master_slice_[i], 0, end - begin),
                     .grad = grad,
                     .compute_copy = flat_range(g.param, begin, end)});
      continue;
    }
    out.push_back(
        {.name = g.name,
         .param = flat_range(g.param, begin, end),
         .grad = grad,
         .compute_copy = g.compute_copy.empty() ? Tensor{} : flat_range(g.compute_copy, begin, end)});
  }
  return out;
}

size_t DataParallel::master_slice_bytes(int64_t elements, int world, DType wide) {
  const size_t bytes = size_t((elements + world - 1) / world) * dtype_size(wide);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

std::unique_ptr<Arena> DataParallel::make_master_slices(const std::vector<std::string>& masters,
                                                        MemoryResource& memory, DType wide) {
  LT_CHECK(shards_optimizer(), "make_master_slices: sharding {} (zero1, zero2 and zero3 only)",
           dist::sharding_name(sharding_));
  LT_CHECK(!shards_masters(), "make_master_slices: the masters are sliced already");
  std::vector<bool> sliced(full_.size(), false);
  size_t bytes = kAlignment;
  for (size_t i = 0; i < full_.size(); ++i) {
    const ParamGroup& g = full_[i];
    sliced[i] = std::find(masters.begin(), masters.end(), g.name) != masters.end();
    if (!sliced[i]) continue;
    LT_CHECK(
        g.compute_copy.empty() && dtype_size(g.param.dtype) < dtype_size(wide),
        "make_master_slices: '{}' is {} with{} a compute copy, expected a working weight narrower than {}",
        g.name, dtype_name(g.param.dtype), g.compute_copy.empty() ? "out" : "", dtype_name(wide));
    bytes += master_slice_bytes(g.param.numel(), comm_.world_size(), wide);
  }
  auto arena = std::make_unique<Arena>("master weights (zero1/zero2 slices)", memory, bytes);
  for (size_t i = 0; i < full_.size(); ++i) {
    if (!sliced[i]) continue;
    const int64_t c = slice_capacity(i);
    const Tensor slice(arena->alloc_bytes(full_[i].name, size_t(c) * dtype_size(wide)), wide, {c},
                       arena->device());
    ops::zero(ctx_, slice);  // the padding past the slice gathers as zeros
    const auto [begin, end] = mine_[i];
    if (begin < end)
      ops::copy(ctx_, flat_range(slice, 0, end - begin),
                layer_shard_[i] ? flat_range(layer_shard_[i]->param, 0, end - begin)
                                : flat_range(full_[i].param, begin, end));
    master_slice_[i] = slice;
  }
  master_arena_bytes_ = bytes;
  return arena;
}

int64_t DataParallel::master_index(const std::string& name) const {
  for (size_t i = 0; i < full_.size(); ++i)
    if (full_[i].name == name && !master_slice_[i].empty()) return int64_t(i);
  return -1;
}

Tensor DataParallel::master_slice(const std::string& name) const {
  const int64_t i = master_index(name);
  return i < 0 ? Tensor{} : master_slice_[size_t(i)];
}

bool DataParallel::load_master(const std::string& name, const Tensor& whole) {
  const int64_t i = master_index(name);
  if (i < 0) return false;
  LT_CHECK(whole.numel() == full_[size_t(i)].param.numel(), "load_master: '{}' has {} elements, not {}", name,
           full_[size_t(i)].param.numel(), whole.numel());
  const auto [begin, end] = mine_[size_t(i)];
  if (begin < end)
    ops::copy(ctx_, flat_range(master_slice_[size_t(i)], 0, end - begin), flat_range(whole, begin, end));
  return true;
}

bool DataParallel::gather_master(const std::string& name, Tensor into) {
  const int64_t found = master_index(name);
  if (found < 0) return false;
  const size_t i = size_t(found);
  const Tensor& slice = master_slice_[i];
  LT_CHECK(into.empty() || into.numel() == full_[i].param.numel(),
           "gather_master: '{}' has {} elements, not {}", name, full_[i].param.numel(), into.numel());
  const Tensor gathered = whole_scratch(i, slice.dtype);
  comm_.all_gather(slice, gathered);
  // The first n of the world * c gathered elements are the tensor (the last slices are padded).
  if (!into.empty()) ops::copy(ctx_, into.reshaped({into.numel()}), flat_range(gathered, 0, into.numel()));
  return true;
}

void DataParallel::attach_layers(Zero3Layers& layers) {
  LT_CHECK(sharding_ == dist::Sharding::Zero3, "attach_layers: sharding is not zero3");
  layers_ = &layers;
  for (size_t i = 0; i < full_.size(); ++i)
    for (const Zero3Layers::Shard& s : layers.shards())
      if (s.spec.hf_name == full_[i].name) layer_shard_[i] = &s;
}

void DataParallel::attach_layers(Zero3Layers& layers, const std::vector<ParamGroup>& moved,
                                 AdamW& optimizer) {
  for (ParamGroup& g : full_) {
    for (const ParamGroup& m : moved)
      if (m.name == g.name) g = m;
  }
  attach_layers(layers);
  const std::vector<ParamGroup> groups = optimizer_groups();
  LT_CHECK(groups.size() == optimizer.params().size(), "attach_layers: {} groups, the optimizer has {}",
           groups.size(), optimizer.params().size());
  for (size_t k = 0; k < groups.size(); ++k)
    optimizer.rebind(k, groups[k].param, groups[k].grad, groups[k].compute_copy);
}

void DataParallel::attach_gradient_slices(const LayerGradientShards& slices) {
  LT_CHECK(sharding_ == dist::Sharding::Zero2 && buckets_,
           "attach_gradient_slices: sharding {} over {} ranks (zero2 over several only)",
           dist::sharding_name(sharding_), comm_.world_size());
  slices_gradients_ = true;
  for (size_t i = 0; i < full_.size(); ++i)
    for (const LayerGradientShards::Slice& s : slices.slices())
      if (s.spec.hf_name == full_[i].name) grad_slice_[i] = s.grad;
  // The buckets again, over the gradients that stay whole (the sliced ones left out).
  std::vector<ParamGroup> whole = full_;
  for (size_t i = 0; i < whole.size(); ++i)
    if (sliced(i)) whole[i].grad = Tensor{};
  buckets_ = std::make_unique<GradientBuckets>(comm_, whole, GradientBuckets::Collective::ReduceScatter);
}

void DataParallel::reduce_gradients() {
  if (buckets_) buckets_->finish();
  if (!reduce_scatters()) {
    if (!buckets_)
      for (const ParamGroup& g : full_) comm_.all_reduce(g.grad, dist::ReduceOp::Sum);
    return;
  }
  for (size_t i = 0; i < full_.size(); ++i) {
    if (layer_shard_[i] || sliced(i)) continue;    // reduce-scattered layer by layer during the backward
    if (buckets_ && buckets_->holds(i)) continue;  // reduce-scattered in place: its slice is block `rank`
    const Tensor& grad = full_[i].grad;
    const Tensor whole = whole_scratch(i, grad.dtype), part = part_scratch(i, grad.dtype);
    ops::zero(ctx_, whole);  // the padding past n adds zeros
    ops::copy(ctx_, flat_range(whole, 0, grad.numel()), flat(grad));
    comm_.reduce_scatter(whole, part, dist::ReduceOp::Sum);
    const auto [begin, end] = mine_[i];
    if (begin < end) ops::copy(ctx_, flat_range(grad, begin, end), flat_range(part, 0, end - begin));
  }
}

std::vector<Tensor> DataParallel::local_gradients() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < full_.size(); ++i) {
    if (const Zero3Layers::Shard* s = layer_shard_[i]) {
      if (s->owned > 0) out.push_back(flat_range(s->grad, 0, s->owned));
    } else if (!reduce_scatters()) {
      out.push_back(full_[i].grad);
    } else if (sliced(i)) {
      if (mine_[i].begin < mine_[i].end)
        out.push_back(flat_range(grad_slice_[i], 0, mine_[i].end - mine_[i].begin));
    } else if (mine_[i].begin < mine_[i].end) {
      out.push_back(flat_range(full_[i].grad, mine_[i].begin, mine_[i].end));
    }
  }
  return out;
}

double DataParallel::global_norm() const {
  const std::vector<Tensor> grads = local_gradients();
  if (!reduce_scatters()) return global_grad_norm(ctx_, grads);  // every rank holds every gradient
  // Each rank's squared norm over its slices, summed over ranks in rank order: the grouping of the sum
  // differs from one process's, so the norm agrees with it to rounding (and is the same on every rank). A
  // rank's inf or NaN reaches every rank's sum.
  double squares = 0;
  for (double s : ops::grad_norms_squared(ctx_, grads)) squares += s;
  comm_.all_reduce(Tensor(&squares, DType::F64, {1}), dist::ReduceOp::Sum);
  return std::sqrt(squares);
}

double DataParallel::clip(double max_norm) {
  if (!reduce_scatters()) return clip_grad_norm(ctx_, local_gradients(), max_norm);
  return clip_by_norm(ctx_, local_gradients(), global_norm(), max_norm);
}

double DataParallel::unscale_and_clip(double scale, double max_norm) {
  return unscale_and_clip_by_norm(ctx_, local_gradients(), global_norm(), scale, max_norm);
}

void DataParallel::gather_into(size_t index, Tensor whole, Tensor mine) {
  const Tensor part = part_scratch(index, whole.dtype), gathered = whole_scratch(index, whole.dtype);
  ops::zero(ctx_, part);
  if (mine.numel() > 0) ops::copy(ctx_, flat_range(part, 0, mine.numel()), flat(mine));
  comm_.all_gather(part, gathered);
  ops::copy(ctx_, flat(whole), flat_range(gathered, 0, whole.numel()));
}

void DataParallel::gather_parameters() {
  if (!shards_optimizer()) return;
  if (layers_) layers_->weights_changed();  // updated in place, gathered by the next step's hooks
  finish_parameters();                      // (a no-op: every step's end waited for the last gathers)
  // The blocking gathers first: the compute stream's wait for one covers every collective issued before
  // it on the communicator's stream, so an overlapped gather before it would not overlap anything.
  std::vector<size_t> overlapped;
  for (size_t i = 0; i < full_.size(); ++i) {
    if (layer_shard_[i]) continue;
    const ParamGroup& g = full_[i];
    const bool in_place = g.param.numel() % comm_.world_size() == 0;
    if (overlap_gathers_ && in_place && g.layer >= 0) {
      overlapped.push_back(i);
      continue;
    }
    const Tensor mine = flat_range(g.param, mine_[i].begin, mine_[i].end);
    if (in_place)
      comm_.all_gather(mine, flat(g.param));  // in place: the slice is block `rank` of the tensor
    else
      gather_into(i, g.param, mine);
    // AdamW rounded this rank's slice into the compute copy; the others' arrive as the parameter's bits
    // and are rounded here the same way (to nearest).
    if (!g.compute_copy.empty()) ops::copy(ctx_, flat(g.compute_copy), flat(g.param));
  }
  // Then layer after layer from the first, the order the forward needs them in, a mark after each layer.
  for (size_t layer = 0; layer < unready_.size(); ++layer) {
    for (size_t i : overlapped) {
      if (full_[i].layer != int64_t(layer)) continue;
      comm_.all_gather_overlapped(flat_range(full_[i].param, mine_[i].begin, mine_[i].end),
                                  flat(full_[i].param));
      unready_[layer].push_back(i);
    }
    if (!unready_[layer].empty()) layer_mark_[layer] = comm_.overlapped_mark();
  }
}

void DataParallel::layer_ready(int64_t layer) {
  if (layer < 0 || size_t(layer) >= unready_.size() || unready_[size_t(layer)].empty()) return;
  comm_.wait_overlapped_mark(layer_mark_[size_t(layer)]);
  for (size_t i : unready_[size_t(layer)]) {
    const ParamGroup& g = full_[i];
    if (!g.compute_copy.empty())
      ops::copy(ctx_, flat(g.compute_copy), flat(g.param));  // as gather_parameters
  }
  unready_[size_t(layer)].clear();
}

model::LayerHooks DataParallel::parameter_hooks() {
  if (!shards_optimizer() || unready_.empty()) return {};
  return {.before_forward = [this](int64_t layer) { layer_ready(layer); }};
}

void DataParallel::finish_parameters() {
  for (size_t layer = 0; layer < unready_.size(); ++layer) layer_ready(int64_t(layer));
}

std::vector<DataParallel::StateCut> DataParallel::state_layout() const {
  std::vector<StateCut> out;
  for (size_t i = 0; i < full_.size(); ++i) {
    const Tensor& p = full_[i].param;
    StateCut& cut = out.emplace_back(
        StateCut{.name = full_[i].name, .shape = {p.shape.begin(), p.shape.begin() + p.ndim}, .ranks = {}});
    for (int r = 0; r < comm_.world_size(); ++r)
      cut.ranks.push_back(shards_optimizer() ? slice_of(i, r) : Slice{0, p.numel()});
  }
  return out;
}

std::unique_ptr<AdamW> DataParallel::whole_optimizer(const AdamWOptions& options) const {
  if (!shards_optimizer()) return nullptr;
  return std::make_unique<AdamW>(ctx_, full_, options);
}

void DataParallel::scatter_state(AdamW& whole, AdamW& sharded) const {
  LT_CHECK(shards_optimizer(), "scatter_state: the optimizer is not sharded");
  const std::vector<io::NamedTensor> all = whole.state_tensors();
  std::vector<io::NamedTensor> slices{all[0]};  // "step"
  for (size_t i = 0; i < full_.size(); ++i) {
    const auto [begin, end] = mine_[i];
    if (begin == end) continue;
    for (size_t moment = 0; moment < 2; ++moment) {
      const io::NamedTensor& t = all[1 + 2 * i + moment];
      slices.push_back({t.name, flat_range(t.tensor, begin, end)});
    }
  }
  std::vector<std::vector<char>> staging;
  sharded.load_state(on_host(ctx_, std::move(slices), staging), "the checkpoint's optimizer state");
}

}  // namespace lt::train
