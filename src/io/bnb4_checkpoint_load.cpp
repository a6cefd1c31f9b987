// Reading a 4-bit checkpoint (transformers + bitsandbytes layout, bnb4_checkpoint_save.cpp describes it).
// Every piece is checked against the config and the quant state before it is used: a file that does not
// say exactly what it holds is refused naming the tensor, never dequantized into wrong numbers.
#include <cstring>
#include <set>

#include "core/error.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors.h"
#include "model/hf_layout.h"

namespace lt::io {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

class Bnb4Reader {
 public:
  Bnb4Reader(const std::string& dir, const Bnb4Config& quant)
      : reader_(CheckpointReader::open(dir)), quant_(quant) {}

  const CheckpointReader& reader() const { return *reader_; }

  // The bytes of tensor `name`, which must be `dtype` with `shape`.
  template <class T>
  std::vector<T> read(const std::string& name, StDType dtype, const std::vector<int64_t>& shape) {
    LT_CHECK(reader_->contains(name),
             "checkpoint {}: tensor '{}' is missing (a bitsandbytes 4-bit {} weight has it)", reader_->path(),
             name, ops::quant4_type_name(quant_.quant_type));
    const SafetensorsEntry& e = reader_->entry(name);
    LT_CHECK(e.dtype == dtype && e.shape == shape, "checkpoint {}: tensor '{}' is {} {}, expected {} {}",
             reader_->path(), name, st_dtype_name(e.dtype), shape_string(e.shape), st_dtype_name(dtype),
             shape_string(shape));
    used_.insert(name);
    std::vector<T> out(size_t(e.numel()));
    if (!out.empty()) std::memcpy(out.data(), e.data, out.size() * sizeof(T));
    return out;
  }

  nlohmann::json read_quant_state(const std::string& name) {
    LT_CHECK(reader_->contains(name),
             "checkpoint {}: tensor '{}' is missing (the quant state of a {} weight)", reader_->path(), name,
             ops::quant4_type_name(quant_.quant_type));
    const SafetensorsEntry& e = reader_->entry(name);
    LT_CHECK(e.dtype == StDType::U8 && e.shape.size() == 1,
             "checkpoint {}: tensor '{}' is {} {}, expected U8 bytes", reader_->path(), name,
             st_dtype_name(e.dtype), shape_string(e.shape));
    used_.insert(name);
    const std::string text(reinterpret_cast<const char*>(e.data), size_t(e.numel()));
    try {
      nlohmann::json j = nlohmann::json::parse(text);
      LT_CHECK(j.is_object(), "checkpoint {}: tensor '{}' holds {}, expected a JSON object", reader_->path(),
               name, text);
      return j;
    } catch (const nlohmann::json::exception& ex) {
      LT_FAIL("checkpoint {}: tensor '{}' is not the JSON of a quant state: {}", reader_->path(), name,
              ex.what());
    }
  }

  ops::Quant4Weight read_projection(const model::WeightSpec& spec) {
    const std::string& p = spec.hf_name;
    const std::string type = std::string(ops::quant4_type_name(quant_.quant_type));
    const std::string state_name = p + ".quant_state.bitsandbytes__" + type;
    auto fail = [&](const std::string& what) {
      LT_FAIL("checkpoint {}: quant state '{}': {}", reader_->path(), state_name, what);
    };
    const nlohmann::json state = read_quant_state(state_name);
    ops::Quant4Weight w;
    w.type = quant_.quant_type;
    w.double_quant = quant_.double_quant;
    if (state.value("quant_type", std::string()) != type)
      fail(fmt::format("quant_type is {}, expected \"{}\" (config.json's bnb_4bit_quant_type)",
                       state.value("quant_type", nlohmann::json()).dump(), type));
    if (state.value("blocksize", int64_t(0)) != ops::kQuant4BlockSize)
      fail(fmt::format("blocksize is {}, expected {} (transformers' only block size)",
                       state.value("blocksize", nlohmann::json()).dump(), ops::kQuant4BlockSize));
    auto dtype = dtype_from_torch_name(state.value("dtype", std::string()));
    if (!dtype || *dtype == DType::F64)
      fail(fmt::format("dtype is {}, expected bfloat16, float16 or float32",
                       state.value("dtype", nlohmann::json()).dump()));
    w.dtype = *dtype;
    if (!state.contains("shape") || state["shape"] != nlohmann::json(spec.shape))
      fail(fmt::format("shape is {}, expected {} (config.json's)",
                       state.value("shape", nlohmann::json()).dump(), nlohmann::json(spec.shape).dump()));
    w.shape = spec.shape;
    const bool nested = state.contains("nested_offset");
    if (nested != quant_.double_quant)
      fail(fmt::format("{} nested_offset, but config.json's bnb_4bit_use_double_quant is {}",
                       nested ? "has" : "has no", quant_.double_quant));

    const int64_t n = spec.numel();
    const int64_t blocks = ops::quant4_blocks(n);
    w.packed = read<uint8_t>(p, StDType::U8, {ops::quant4_packed_bytes(n), 1});
    const std::vector<float> code = read<float>(p + ".quant_map", StDType::F32, {16});
    const std::array<float, 16> expected = ops::quant4_quant_map(w.type);
    for (size_t i = 0; i < 16; ++i)
      LT_CHECK(std::memcmp(&code[i], &expected[i], 4) == 0,
               "checkpoint {}: tensor '{}.quant_map'[{}] is {}, bitsandbytes' {} table has {}",
               reader_->path(), p, i, code[i], type, expected[i]);
    if (!nested) {
      w.absmax = read<float>(p + ".absmax", StDType::F32, {blocks});
      return w;
    }
    if (state.value("nested_blocksize", int64_t(0)) != ops::kNestedBlockSize)
      fail(fmt::format("nested_blocksize is {}, expected {}",
                       state.value("nested_blocksize", nlohmann::json()).dump(), ops::kNestedBlockSize));
    if (state.value("nested_dtype", std::string()) != "float32")
      fail(fmt::format("nested_dtype is {}, expected \"float32\"",
                       state.value("nested_dtype", nlohmann::json()).dump()));
    if (!state["nested_offset"].is_number()) fail("nested_offset is not a number");
    // The offset is the f32 mean stored as a Python float: the round trip through double is exact.
    w.offset = float(state["nested_offset"].get<double>());
    w.qabsmax = read<uint8_t>(p + ".absmax", StDType::U8, {blocks});
    w.nested_absmax = read<float>(p + ".nested_absmax", StDType::F32, {ops::nested_blocks(blocks)});
    w.nested_map = read<float>(p + ".nested_quant_map", StDType::F32, {256});
    return w;
  }

  void read_plain(const model::WeightSpec& spec, Tensor dst) {
    LT_CHECK(reader_->contains(spec.hf_name), "checkpoint {}: tensor '{}' is missing", reader_->path(),
             spec.hf_name);
    Tensor view = dst;
    view.ndim = int(spec.shape.size());
    for (size_t d = 0; d < spec.shape.size(); ++d) view.shape[d] = spec.shape[d];
    reader_->read_into(spec.hf_name, view);
    used_.insert(spec.hf_name);
  }

  void check_all_used() const {
    std::vector<std::string> unused;
    for (const std::string& name : reader_->names())
      if (!used_.count(name)) unused.push_back(name);
    LT_CHECK(unused.empty(), "checkpoint {}: {} tensor(s) do not belong to this 4-bit model: {}",
             reader_->path(), unused.size(),
             fmt::join(unused.begin(), unused.begin() + long(std::min<size_t>(unused.size(), 8)), ", "));
  }

 private:
  std::unique_ptr<CheckpointReader> reader_;
  Bnb4Config quant_;
  std::set<std::string> used_;
};

void dequantize_into(const ops::Quant4Weight& w, Tensor dst) {
  if (dst.dtype != DType::F64) {
    ops::dequantize_weight_4bit(w, dst.dtype, dst.data);
    return;
  }
  std::vector<float> f32(size_t(w.numel()));
  ops::dequantize_weight_4bit(w, DType::F32, f32.data());
  convert_elements(dst.data, DType::F64, f32.data(), DType::F32, f32.size());
}

}  // namespace

Bnb4Weights load_bnb4_checkpoint(const std::string& dir, const model::ModelConfig& config,
                                 model::ModelWeights& weights, bool dequantize) {
  std::optional<Bnb4Config> quant = read_bnb4_quantization(dir);
  LT_CHECK(quant.has_value(), "{}: config.json has no quantization_config: not a 4-bit checkpoint", dir);
  Bnb4Reader reader(dir, *quant);
  Bnb4Weights out;
  out.quant = *quant;
  for (const model::WeightSpec& spec : model::weight_specs(config)) {
    Tensor& dst = model::weight_of(weights, spec);
    // Without dequantize, a projection may have no dense tensor (QLoRA keeps it in 4 bits).
    if (!dequantize && dst.empty() && is_quantized_kind(spec.kind)) {
      out.projections.emplace(spec.hf_name, reader.read_projection(spec));
      continue;
    }
    LT_CHECK(!dst.empty() && dst.device == Device::CPU && dst.numel() == spec.numel(),
             "loading {}: weight '{}' has no host tensor of {} elements to load into", dir, spec.hf_name,
             spec.numel());
    // The checkpoint's row order (BLOOM's query_key_value weight and bias) becomes the engine's.
    const bool hf_rows = model::has_hf_row_order(config, spec);
    if (!is_quantized_kind(spec.kind)) {
      reader.read_plain(spec, dst);
      if (hf_rows) model::qkv_rows_from_hf(config, model::spec_view(spec, dst.data, dst.dtype));
      continue;
    }
    ops::Quant4Weight w = reader.read_projection(spec);
    if (dequantize) {
      dequantize_into(w, dst);
      if (hf_rows) model::qkv_rows_from_hf(config, model::spec_view(spec, dst.data, dst.dtype));
    }
    out.projections.emplace(spec.hf_name, std::move(w));
  }
  reader.check_all_used();
  return out;
}

}  // namespace lt::io
