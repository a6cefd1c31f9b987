// Loading an HF checkpoint into ModelWeights: every tensor the config needs must be there with the config's
// shape, and every tensor there must mean something to the model, so that a checkpoint for another
// architecture or size is refused by name instead of half-loaded.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/dtype_visit.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"

namespace lt::io {
namespace {

using model::WeightKind;
using model::WeightSpec;

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

// PEFT keeps the frozen weight of a wrapped layer as `<module>.base_layer.<param>`.
std::string strip_base_layer(const std::string& name) {
  const std::string marker = ".base_layer";
  std::string out;
  size_t from = 0;
  for (size_t at = name.find(marker + "."); at != std::string::npos; at = name.find(marker + ".", from)) {
    out.append(name, from, at - from);
    from = at + marker.size();  // keeps the '.' that follows
  }
  out.append(name, from, std::string::npos);
  return out;
}

bool is_ignored(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Tensor view_of(std::vector<char>& storage, DType dtype, int64_t rows, int64_t cols) {
  storage.resize(size_t(rows * std::max<int64_t>(cols, 1)) * dtype_size(dtype));
  return cols > 0 ? Tensor(storage.data(), dtype, {rows, cols}) : Tensor(storage.data(), dtype, {rows});
}

class Loader {
 public:
  Loader(const std::string& path, const model::ModelConfig& config)
      : reader_(CheckpointReader::open(path)), config_(config) {
    for (const std::string& name : reader_->names()) {
      if (is_ignored(name)) continue;
      std::string plain = strip_base_layer(name);
      auto [it, inserted] = by_plain_name_.emplace(plain, name);
      LT_CHECK(inserted, "checkpoint {}: tensors '{}' and '{}' are both the model's '{}'", reader_->path(),
               it->second, name, plain);
    }
  }

  void load(model::ModelWeights& weights, const model::StreamedWeights* streamed) {
    LT_CHECK(!streamed || streamed->device == Device::CPU,
             "load_hf_weights: streamed weights are read into host memory, not {}",
             streamed ? device_name(streamed->device) : "");
    std::vector<char> buffer;  // the streamed tensor being read
    for (const WeightSpec& spec : model::weight_specs(config_)) {
      if (streamed && !streamed->held(spec)) {
        buffer.resize(size_t(spec.numel()) * dtype_size(streamed->dtype));
        const Tensor t = model::spec_view(spec, buffer.data(), streamed->dtype);
        load_one(spec, t);
        if (model::has_hf_row_order(config_, spec)) model::qkv_rows_from_hf(config_, t);
        check_finite(spec, t);
        streamed->consume(spec, t);
        continue;
      }
      load_one(spec, model::weight_of(weights, spec));
      if (model::has_hf_row_order(config_, spec))
        model::qkv_rows_from_hf(config_, model::weight_of(weights, spec));
      check_finite(spec, model::weight_of(weights, spec));
    }
    check_tied_head(weights);
    std::vector<std::string> unused;
    for (const auto& [plain, name] : by_plain_name_)
      if (!used_.count(plain)) unused.push_back(name);
    if (!unused.empty()) {
      size_t shown = std::min<size_t>(unused.size(), 8);
      std::vector<std::string> head(unused.begin(), unused.begin() + long(shown));
      LT_FAIL("checkpoint {}: {} tensor(s) do not belong to a {} with this config.json: {}{}",
              reader_->path(), unused.size(), config_.architecture_name, fmt::join(head, ", "),
              shown < unused.size() ? ", ..." : "");
    }
  }

 private:
  // The checkpoint's name for the model's `plain` name, or nullptr.
  const std::string* find(const std::string& plain) const {
    auto it = by_plain_name_.find(plain);
    return it == by_plain_name_.end() ? nullptr : &it->second;
  }

  void check_shape_of(const std::string& name, const std::vector<int64_t>& expected,
                      const std::string& role) {
    const SafetensorsEntry& entry = reader_->entry(name);
    LT_CHECK(entry.shape == expected,
             "checkpoint {}: tensor '{}' has shape {}, expected {}{} for config.json (hidden_size {}, "
             "intermediate_size {}, heads {}, kv heads {}, head_dim {}, vocab_size {})",
             reader_->path(), name, shape_string(entry.shape), shape_string(expected), role,
             config_.hidden_size, config_.intermediate_size, config_.num_heads, config_.num_kv_heads,
             config_.head_dim, config_.vocab_size);
  }

  void load_one(const WeightSpec& spec, Tensor dst) {
    LT_CHECK(dst.device == Device::CPU && !dst.empty(),
             "loading '{}': the weight is not allocated in host memory", spec.hf_name);
    if (const std::string* name = find(spec.hf_name)) {
      check_shape_of(*name, spec.shape, "");
      reader_->read_into(*name, dst);
      used_.insert(spec.hf_name);
      return;
    }
    if (load_fused_part(spec, dst)) return;
    LT_FAIL("checkpoint {}: tensor '{}' {} is missing (config.json describes a {} that needs it)",
            reader_->path(), spec.hf_name, shape_string(spec.shape), config_.architecture_name);
  }

  // q/k/v from `self_attn.qkv_proj` (rows q, then k, then v) and gate/up from `mlp.gate_up_proj` (rows gate,
  // then up), weights and biases alike. False when the spec is not such a part or no fused tensor exists.
  bool load_fused_part(const WeightSpec& spec, Tensor dst) {
    const int64_t QD = config_.q_dim(), KVD = config_.kv_dim(), F = config_.intermediate_size;
    const std::string layer = "model.layers." + std::to_string(spec.layer) + ".";
    std::string fused;
    int64_t begin = 0, total = 0;
    bool bias = false;
    switch (spec.kind) {
      case WeightKind::AttnQBias:
        bias = true;
        [[fallthrough]];
      case WeightKind::AttnQ:
        fused = "self_attn.qkv_proj", begin = 0, total = QD + 2 * KVD;
        break;
      case WeightKind::AttnKBias:
        bias = true;
        [[fallthrough]];
      case WeightKind::AttnK:
        fused = "self_attn.qkv_proj", begin = QD, total = QD + 2 * KVD;
        break;
      case WeightKind::AttnVBias:
        bias = true;
        [[fallthrough]];
      case WeightKind::AttnV:
        fused = "self_attn.qkv_proj", begin = QD + KVD, total = QD + 2 * KVD;
        break;
      case WeightKind::FfnGateBias:
        bias = true;
        [[fallthrough]];
      case WeightKind::FfnGate:
        fused = "mlp.gate_up_proj", begin = 0, total = 2 * F;
        break;
      case WeightKind::FfnUpBias:
        bias = true;
        [[fallthrough]];
      case WeightKind::FfnUp:
        fused = "mlp.gate_up_proj", begin = F, total = 2 * F;
        break;
      default:
        return false;
    }
    const std::string plain = layer + fused + (bias ? ".bias" : ".weight");
    const std::string* name = find(plain);
    if (!name) return false;
    const int64_t cols = bias ? 0 : config_.hidden_size;
    std::vector<int64_t> fused_shape = bias ? std::vector<int64_t>{total} : std::vector<int64_t>{total, cols};
    check_shape_of(*name, fused_shape, fmt::format(" (fused {})", fused));
    if (fused_name_ != *name || fused_dtype_ != dst.dtype) {
      reader_->read_into(*name, view_of(fused_storage_, dst.dtype, total, cols));
      fused_name_ = *name;
      fused_dtype_ = dst.dtype;
    }
    const size_t row_bytes = size_t(bias ? 1 : cols) * dtype_size(dst.dtype);
    const int64_t rows = spec.shape[0];
    std::memcpy(dst.data, fused_storage_.data() + size_t(begin) * row_bytes, size_t(rows) * row_bytes);
    used_.insert(plain);
    return true;
  }

  // A NaN or infinity in a base weight makes every loss NaN: reported here, naming the tensor, rather than
  // at the first step as a diverged run.
  void check_finite(const WeightSpec& spec, const Tensor& t) const {
    const size_t n = size_t(t.numel());
    visit_floating(t.dtype, spec.hf_name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* p = static_cast<const T*>(t.data);
      bool finite =
          true;  // x - x is 0 exactly when x is finite: one branch-free pass the compiler vectorizes
      for (size_t i = 0; i < n; ++i) {
        const C v = load_as<C>(p[i]);
        finite &= (v - v) == C(0);
      }
      if (finite) return;
      for (size_t i = 0; i < n; ++i) {
        const double v = load_as<double>(p[i]);
        LT_CHECK(std::isfinite(v),
                 "checkpoint {}: tensor '{}' holds {} at element {}; expected finite base weights (the "
                 "checkpoint is damaged or was saved after a diverged run)",
                 reader_->path(), spec.hf_name, v, i);
      }
    });
  }

  // A tied config takes the head from the embedding; a checkpoint that also stores lm_head.weight is accepted
  // only when it is that same matrix.
  void check_tied_head(const model::ModelWeights& weights) {
    const std::string* name = config_.tie_word_embeddings ? find("lm_head.weight") : nullptr;
    if (!name) return;
    check_shape_of(*name, {config_.vocab_size, config_.hidden_size}, "");
    std::vector<char> storage;
    Tensor head = view_of(storage, weights.embed.dtype, config_.vocab_size, config_.hidden_size);
    reader_->read_into(*name, head);
    LT_CHECK(std::memcmp(head.data, weights.embed.data, head.bytes()) == 0,
             "checkpoint {}: config.json ties the embeddings (tie_word_embeddings) but '{}' differs from "
             "'model.embed_tokens.weight'",
             reader_->path(), *name);
    used_.insert("lm_head.weight");
  }

  std::unique_ptr<CheckpointReader> reader_;
  const model::ModelConfig& config_;
  std::map<std::string, std::string> by_plain_name_;  // model name -> checkpoint name
  std::set<std::string> used_;                        // model names consumed
  std::string fused_name_;                            // the fused tensor in fused_storage_
  DType fused_dtype_ = DType::F32;
  std::vector<char> fused_storage_;
};

}  // namespace

void load_hf_weights(const std::string& path_or_dir, const model::ModelConfig& config,
                     model::ModelWeights& weights, const model::StreamedWeights* streamed) {
  LT_CHECK(weights.layers.size() == size_t(config.num_layers),
           "load_hf_weights: weights have {} layers, config.json has {}", weights.layers.size(),
           config.num_layers);
  Loader loader(path_or_dir, config);
  loader.load(weights, streamed);
}

}  // namespace lt::io
