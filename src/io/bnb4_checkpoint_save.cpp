// Writing a 4-bit checkpoint as transformers' save_pretrained does for a bitsandbytes model: each projection
// P as P.weight (packed codes, U8 [(n+1)/2, 1]), P.weight.absmax, P.weight.quant_map and, double-quantized,
// P.weight.nested_absmax and P.weight.nested_quant_map, plus the quant state's scalars as JSON bytes in
// P.weight.quant_state.bitsandbytes__<type> (bitsandbytes' pack_dict_to_tensor: json.dumps, keys in its
// order).
#include <deque>

#include "core/error.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"

namespace lt::io {
namespace {

// json.dumps of the quant state's non-tensor entries: ", " and ": " separators, Python's shortest float repr
// (nlohmann writes the same shortest round-trip digits).
std::string quant_state_json(const ops::Quant4Weight& w) {
  std::string shape;
  for (size_t i = 0; i < w.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(w.shape[i]);
  std::string s =
      fmt::format(R"({{"quant_type": "{}", "blocksize": {}, "dtype": "{}", "shape": [{}])",
                  ops::quant4_type_name(w.type), ops::kQuant4BlockSize, torch_dtype_name(w.dtype), shape);
  if (w.double_quant)
    s += fmt::format(R"(, "nested_blocksize": {}, "nested_dtype": "float32", "nested_offset": {})",
                     ops::kNestedBlockSize, nlohmann::json(double(w.offset)).dump());
  return s + "}";
}

class TensorList {
 public:
  void add(std::string name, const void* data, DType dtype, std::initializer_list<int64_t> shape) {
    tensors_.push_back({std::move(name), Tensor(const_cast<void*>(data), dtype, shape)});
  }
  void add(std::string name, const Tensor& t) { tensors_.push_back({std::move(name), t}); }
  // A copy of t's bytes, held here (to be reordered before writing); returns the copy.
  Tensor add_copy(std::string name, const Tensor& t) {
    owned_.emplace_back(static_cast<const char*>(t.data), size_t(t.bytes()));
    Tensor copy = t;
    copy.data = owned_.back().data();
    add(std::move(name), copy);
    return copy;
  }
  void add_bytes(std::string name, std::string bytes) {
    owned_.push_back(std::move(bytes));
    add(std::move(name), owned_.back().data(), DType::U8, {int64_t(owned_.back().size())});
  }
  const std::vector<NamedTensor>& tensors() const { return tensors_; }

 private:
  std::vector<NamedTensor> tensors_;
  std::deque<std::string> owned_;
};

}  // namespace

std::vector<std::string> save_bnb4_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                              const model::ModelWeights& weights,
                                              const Bnb4Weights& quantized) {
  const DType plain = weights.dtype;
  LT_CHECK(plain == DType::F32 || plain == DType::BF16 || plain == DType::F16,
           "saving {}: the unquantized tensors are {}, expected f32, bf16 or f16", dir, dtype_name(plain));
  TensorList list;
  const std::array<float, 16> quant_maps[2] = {ops::quant4_quant_map(ops::Quant4Type::NF4),
                                               ops::quant4_quant_map(ops::Quant4Type::FP4)};
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    if (!is_quantized_kind(spec.kind)) {
      const Tensor& t = model::weight_of(weights, spec);
      LT_CHECK(!t.empty() && t.device == Device::CPU && t.dtype == plain && t.numel() == spec.numel(),
               "saving {}: weight '{}' is not a host {} tensor of {} elements", dir, spec.hf_name,
               dtype_name(plain), spec.numel());
      Tensor view = t;  // the HF shape, whatever view shape the weights have
      view.ndim = int(spec.shape.size());
      for (size_t d = 0; d < spec.shape.size(); ++d) view.shape[d] = spec.shape[d];
      if (model::has_hf_row_order(config, spec))  // BLOOM's query_key_value bias in the checkpoint's order
        model::qkv_rows_to_hf(config, list.add_copy(spec.hf_name, view));
      else
        list.add(spec.hf_name, view);
      continue;
    }
    auto it = quantized.projections.find(spec.hf_name);
    LT_CHECK(it != quantized.projections.end(), "saving {}: no 4-bit weight for '{}'", dir, spec.hf_name);
    const ops::Quant4Weight& w = it->second;
    const int64_t n = spec.numel();
    LT_CHECK(w.numel() == n && w.type == quantized.quant.quant_type &&
                 w.double_quant == quantized.quant.double_quant,
             "saving {}: the 4-bit weight '{}' does not match the config ({} elements, {}, double quant {})",
             dir, spec.hf_name, n, ops::quant4_type_name(quantized.quant.quant_type),
             quantized.quant.double_quant);
    const int64_t blocks = ops::quant4_blocks(n);
    const std::string& p = spec.hf_name;
    list.add(p, w.packed.data(), DType::U8, {ops::quant4_packed_bytes(n), 1});
    if (w.double_quant) {
      list.add(p + ".absmax", w.qabsmax.data(), DType::U8, {blocks});
      list.add(p + ".nested_absmax", w.nested_absmax.data(), DType::F32, {ops::nested_blocks(blocks)});
      list.add(p + ".nested_quant_map", w.nested_map.data(), DType::F32, {256});
    } else {
      list.add(p + ".absmax", w.absmax.data(), DType::F32, {blocks});
    }
    list.add(p + ".quant_map", quant_maps[size_t(w.type)].data(), DType::F32, {16});
    list.add_bytes(p + ".quant_state.bitsandbytes__" + std::string(ops::quant4_type_name(w.type)),
                   quant_state_json(w));
  }
  nlohmann::json cfg = hf_config_json(config, plain);
  cfg["quantization_config"] = bnb4_quantization_json(quantized.quant);
  return write_hf_directory(dir, cfg, list.tensors(), uint64_t(5) << 30);
}

}  // namespace lt::io
