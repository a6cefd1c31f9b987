#include "train/qlora_model.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/error.h"
#include "io/bnb4_checkpoint.h"
#include "io/hf_checkpoint.h"
#include "model/hf_layout.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "ops/quant4_ops.h"
#include "train/config_enums.h"

namespace lt::train {

bool is_qlora(const TrainConfig& c) {
  // adapter: qlora and load_in_4bit: true are read as bits: 4 (train_config_fields.cpp).
  return c.finetune == Finetune::Lora && c.bits == 4;
}

QloraOptions qlora_options(const TrainConfig& c) {
  QloraOptions o;
  o.quant_type = c.bnb_4bit_quant_type;
  o.double_quant = c.bnb_4bit_use_double_quant;
  o.torch_dtype = c.torch_dtype;
  if (c.bnb_4bit_compute_dtype != "auto") {
    const std::optional<DType> compute = io::dtype_from_torch_name(c.bnb_4bit_compute_dtype);
    const DType run = compute_dtype(c.precision);
    LT_CHECK(
        compute.has_value() && *compute == run,
        "config: 'bnb_4bit_compute_dtype' is '{}' but 'precision' is {}: the projections are dequantized to "
        "the compute dtype; expected auto or {}",
        c.bnb_4bit_compute_dtype, name_of(kPrecisionNames, c.precision), io::torch_dtype_name(run));
  }
  return o;
}

namespace {

// The dense tensors (all but the projections' matrices) of `host` in `dtype` on `device`, and the 4-bit
// projections beside them.
LoadedModel assemble(const ops::Context& ctx, const model::ModelConfig& config,
                     const model::ModelWeights& host, const io::Bnb4Weights& quantized, DType dtype,
                     Device device) {
  LoadedModel m;
  m.config = config;
  m.dtype = dtype;
  m.device = device;
  MemoryResource& memory = ops::memory_resource(device);
  m.arena = std::make_unique<Arena>("weights", memory,
                                    model::weights_bytes(config, dtype, model::dense_under_qlora));
  m.weights = model::allocate_weights(config, dtype, *m.arena, model::dense_under_qlora);
  model::copy_weights(ctx, config, m.weights, host);  // converted to the compute dtype (exact for wider ones)
  m.nf4_arena = std::make_unique<Arena>("4-bit weights", memory,
                                        model::nf4_storage_bytes(config, quantized.quant.double_quant) +
                                            model::nf4_scratch_bytes(config, dtype));
  m.nf4 = model::upload_nf4(ctx, config, quantized.projections, dtype, *m.nf4_arena);
  model::attach_nf4(m.weights, *m.nf4);
  return m;
}

// Refuses a model whose 4-bit form, dense tensors in `source` and one projection being quantized do not fit
// the host's memory, before anything is allocated.
void check_host_fits(const model::ModelConfig& config, DType source, const io::Bnb4Config& quant,
                     const std::string& model_dir) {
  int64_t largest = 0;
  for (const model::WeightSpec& spec : model::weight_specs(config))
    if (!model::dense_under_qlora(spec)) largest = std::max(largest, spec.numel());
  const double bytes =
      double(io::bnb4_model_bytes(config, quant, source)) + double(largest) * dtype_size(source);
  const double memory = double(physical_host_memory_bytes());
  LT_CHECK(memory == 0 || bytes <= memory,
           "{}: quantizing the model to 4 bits needs {} of host memory (the 4-bit projections, the other "
           "weights in {} and one projection being quantized), more than this machine's {}",
           model_dir, format_bytes(bytes), dtype_name(source), format_bytes(memory));
}

// Quantizes projections one at a time on their device (the CPU reference or the CUDA kernel: the same bytes,
// tests/cuda/test_quant4_cuda.cpp) into host Quant4Weights; the double quantization of the block scales is
// done on the host. A GPU's codes and scales go through one device buffer of the largest projection's. A
// fused weight is quantized whole, in the checkpoint's row order, as bitsandbytes quantizes it.
class Projection4BitQuantizer {
 public:
  Projection4BitQuantizer(const model::ModelConfig& config, Device device)
      : config_(config), device_(device) {
    if (device == Device::CPU) return;
    int64_t largest = 0;
    for (const model::WeightSpec& spec : model::weight_specs(config))
      if (!model::dense_under_qlora(spec)) largest = std::max(largest, spec.numel());
    const size_t packed = size_t(ops::quant4_packed_bytes(largest)),
                 scales = size_t(ops::quant4_blocks(largest)) * 4;
    arena_ =
        std::make_unique<Arena>("4-bit quantization", ops::memory_resource(device), packed + scales + 512);
    packed_ = arena_->alloc_bytes("packed codes", packed);
    absmax_ = arena_->alloc_bytes("block scales", scales);
  }

  // x: the streamed buffer holding the weight (in the engine's row order), reordered in place when the
  // checkpoint's differs (BLOOM's query_key_value).
  ops::Quant4Weight quantize(const ops::Context& ctx, const model::WeightSpec& spec, const Tensor& x,
                             const io::Bnb4Config& quant) {
    if (model::has_hf_row_order(config_, spec)) to_hf_rows(ctx, x);
    ops::Quant4Weight w;
    w.type = quant.quant_type;
    w.shape = spec.shape;
    w.dtype = x.dtype;
    const int64_t n = x.numel();
    w.packed.resize(size_t(ops::quant4_packed_bytes(n)));
    w.absmax.resize(size_t(ops::quant4_blocks(n)));
    Tensor packed(w.packed.data(), DType::U8, {int64_t(w.packed.size())});
    Tensor absmax(w.absmax.data(), DType::F32, {int64_t(w.absmax.size())});
    if (device_ == Device::CPU) {
      ops::quantize_4bit(ctx, x.reshaped({n}), quant.quant_type, packed, absmax);
    } else {
      const Tensor d_packed(packed_, DType::U8, {packed.numel()}, device_);
      const Tensor d_absmax(absmax_, DType::F32, {absmax.numel()}, device_);
      ops::quantize_4bit(ctx, x.reshaped({n}), quant.quant_type, d_packed, d_absmax);
      ops::copy(ctx, packed, d_packed);
      ops::copy(ctx, absmax, d_absmax);
    }
    ops::finish_quant4_weight(w, quant.double_quant);
    return w;
  }

 private:
  void to_hf_rows(const ops::Context& ctx, const Tensor& x) {
    if (x.device == Device::CPU) {
      model::qkv_rows_to_hf(config_, x);
      return;
    }
    std::vector<char> host(size_t(x.bytes()));  // the row order changes on the host (one fused weight)
    Tensor h = x;
    h.data = host.data();
    h.device = Device::CPU;
    ops::copy(ctx, h, x);
    model::qkv_rows_to_hf(config_, h);
    ops::copy(ctx, x, h);
  }

  const model::ModelConfig& config_;
  Device device_;
  std::unique_ptr<Arena> arena_;
  void* packed_ = nullptr;
  void* absmax_ = nullptr;
};

std::string describe(const io::Bnb4Config& q) {
  return fmt::format("{}{}", ops::quant4_type_name(q.quant_type), q.double_quant ? " with double quant" : "");
}

}  // namespace

LoadedModel load_qlora_model(const ops::Context& ctx, const std::string& model_dir,
                             const QloraOptions& options, DType dtype, bool random_init, uint64_t seed,
                             Device device, std::string* summary) {
  if (!random_init && io::read_bnb4_quantization(model_dir).has_value()) {
    // A 4-bit checkpoint: its codes as stored (its own quant type and double quantization).
    const model::ModelConfig config = io::load_bnb4_model_config(model_dir);
    model::check_4bit_layout(config);
    Arena host("4-bit checkpoint", HostMemory::instance(),
               model::weights_bytes(config, dtype, model::dense_under_qlora));
    model::ModelWeights weights = model::allocate_weights(config, dtype, host, model::dense_under_qlora);
    const io::Bnb4Weights quantized =
        io::load_bnb4_checkpoint(model_dir, config, weights, /*dequantize=*/false);
    if (summary)
      *summary = fmt::format("QLoRA: {} projections of the 4-bit checkpoint {} ({}), as stored",
                             quantized.projections.size(), model_dir, describe(quantized.quant));
    return assemble(ctx, config, weights, quantized, dtype, device);
  }
  const model::ModelConfig config = model::load_model_config(model_dir);
  model::check_4bit_layout(config);
  // Quantized from the dtype transformers would hold the weights in (bitsandbytes quantizes 16/32-bit
  // values); random weights are drawn in f32 unless torch_dtype names another.
  const DType source =
      random_init && options.torch_dtype == "auto"
          ? DType::F32
          : io::quantization_source_dtype(model_dir, config, options.torch_dtype, "config: 'torch_dtype'");
  // The dense tensors are held in the source dtype (converted to the compute dtype on upload, as a 16-bit
  // run's are); each projection is drawn or read alone and quantized at once, so the host holds the 4-bit
  // model plus one projection in 16/32 bits.
  const io::Bnb4Config quant{.quant_type = options.quant_type, .double_quant = options.double_quant};
  check_host_fits(config, source, quant, model_dir);
  Arena host("dense weights", HostMemory::instance(),
             model::weights_bytes(config, source, model::dense_under_qlora));
  model::ModelWeights weights = model::allocate_weights(config, source, host, model::dense_under_qlora);
  io::Bnb4Weights quantized;
  quantized.quant = quant;
  // Random projections are drawn and quantized on a GPU run's device (a 70B-shaped model's draws take
  // minutes on the host; ops::init_normal says what may differ), a checkpoint's on the host.
  const Device draw = random_init ? device : Device::CPU;
  Projection4BitQuantizer quantizer(config, draw);
  const model::StreamedWeights streamed{.held = model::dense_under_qlora,
                                        .dtype = source,
                                        .device = draw,
                                        .consume = [&](const model::WeightSpec& spec, const Tensor& w) {
                                          quantized.projections.emplace(
                                              spec.hf_name, quantizer.quantize(ctx, spec, w, quant));
                                        }};
  if (random_init)
    model::init_random(ctx, config, weights, seed, &streamed);
  else
    io::load_hf_weights(model_dir, config, weights, &streamed);
  if (summary)
    *summary = fmt::format("QLoRA: {} projections quantized to {} from {}", quantized.projections.size(),
                           describe(quantized.quant), io::torch_dtype_name(source));
  return assemble(ctx, config, weights, quantized, dtype, device);
}

}  // namespace lt::train
