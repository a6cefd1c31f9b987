#include "data/data_loader.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/sampler.h"

namespace lt::data {

DataLoader::DataLoader(std::span<const Example> examples, LoaderOptions options)
    : examples_(examples), options_(options) {
  LT_CHECK(!examples.empty(), "data loader: the dataset has no examples");
  LT_CHECK(options.micro_batch_size >= 1, "micro_batch_size is {}, expected >= 1", options.micro_batch_size);
  LT_CHECK(!(options.group_by_length && options.packing),
           "group_by_length and packing both set: packing already fills rows to pack_len, choose one");
  LT_CHECK(!(options.group_by_length && !options.shuffle),
           "group_by_length needs shuffle (it groups within a random permutation)");
  for (const Example& e : examples) lengths_.push_back(int64_t(e.input_ids.size()));
  int64_t units = int64_t(examples.size());
  if (options.packing) {
    int64_t longest = *std::max_element(lengths_.begin(), lengths_.end());
    LT_CHECK(options.pack_len >= longest,
             "pack_len is {} tokens but the longest example has {}: raise pack_len", options.pack_len,
             longest);
    packed_rows_ = pack_rows(lengths_, options.pack_len);
    units = int64_t(packed_rows_.size());
  }
  int64_t b = options.micro_batch_size;
  steps_per_epoch_ = options.drop_last ? units / b : (units + b - 1) / b;
  LT_CHECK(steps_per_epoch_ > 0, "data loader: {} {} make no full micro-batch of {} with drop_last", units,
           options.packing ? "packed rows" : "examples", b);
}

const std::vector<std::vector<std::vector<int64_t>>>& DataLoader::plan(int64_t epoch) {
  LT_CHECK(epoch >= 0, "epoch is {}, expected >= 0", epoch);
  if (epoch == cached_epoch_) return cached_plan_;
  size_t b = size_t(options_.micro_batch_size);
  std::vector<std::vector<std::vector<int64_t>>> batches;
  if (options_.group_by_length) {
    for (auto& group :
         length_grouped_batches(lengths_, int64_t(b), options_.seed, epoch, options_.megabatch_mult)) {
      std::vector<std::vector<int64_t>> rows;
      for (int64_t i : group) rows.push_back({i});
      batches.push_back(std::move(rows));
    }
  } else {
    int64_t units = options_.packing ? int64_t(packed_rows_.size()) : int64_t(examples_.size());
    std::vector<int64_t> order(static_cast<size_t>(units));
    if (options_.shuffle)
      order = epoch_permutation(units, options_.seed, epoch);
    else
      std::iota(order.begin(), order.end(), int64_t(0));
    for (size_t begin = 0; begin < order.size(); begin += b) {
      std::vector<std::vector<int64_t>> rows;
      for (size_t k = begin; k < std::min(order.size(), begin + b); ++k)
        rows.push_back(options_.packing ? packed_rows_[size_t(order[k])] : std::vector<int64_t>{order[k]});
      batches.push_back(std::move(rows));
    }
  }
  batches.resize(size_t(steps_per_epoch_));  // drop_last: drops the short tail
  cached_plan_ = std::move(batches);
  cached_epoch_ = epoch;
  return cached_plan_;
}

std::vector<std::vector<int64_t>> DataLoader::batch_rows(int64_t epoch, int64_t step) {
  LT_CHECK(step >= 0 && step < steps_per_epoch_, "step {} is outside the epoch's {} steps", step,
           steps_per_epoch_);
  return plan(epoch)[size_t(step)];
}

Batch DataLoader::batch(int64_t epoch, int64_t step) {
  return make_batch(examples_, batch_rows(epoch, step), options_.pad_id, options_.pad_to_multiple);
}

void DataLoader::seek(LoaderPosition position) {
  LT_CHECK(position.epoch >= 0 && position.step >= 0 && position.step < steps_per_epoch_,
           "cannot resume the data loader at epoch {} step {}: an epoch has {} steps", position.epoch,
           position.step, steps_per_epoch_);
  position_ = position;
}

Batch DataLoader::next() {
  Batch out = batch(position_.epoch, position_.step);
  if (++position_.step == steps_per_epoch_) position_ = {position_.epoch + 1, 0};
  return out;
}

}  // namespace lt::data
