// The GPU schedule tests' shared steps (test_chunked_offload_cuda.cpp, test_layer_major_cuda.cpp): a model
// (D 1024, 6 layers, GQA) whose copies and kernels are long enough that a copy not ordered after the kernel
// that writes its slot would read a partial slot, and two training steps on one schedule.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/lora.h"
#include "model/lora_test_util.h"
#include "model/schedule.h"
#include "model/tiny_model.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "support/test_context.h"

namespace lt::test {

inline model::ModelConfig schedule_test_config() {
  model::ModelConfig c = tiny_config(false);
  c.vocab_size = 1000;
  c.hidden_size = 1024;
  c.intermediate_size = 2816;
  c.num_layers = 6;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.max_position_embeddings = 4096;
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  c.rope_type = ops::RopeType::Default;
  c.rope_theta = 10000.0;
  c.layer_window.assign(6, 0);
  return c;
}

struct Outcome {
  std::vector<double> losses;
  std::vector<std::pair<std::string, std::vector<double>>> grads;
  double seconds = 0;
};

inline std::vector<double> to_f64(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  ops::copy(ctx, Tensor(v.data(), DType::F64, {t.numel()}), t);
  return v;
}

// Two forward/backward steps of `batch` on one schedule on the GPU, bf16, gradients in f32 (of the
// adapters with `host_lora`, else of every weight); a page-locked host arena when the options offload.
inline Outcome run_two_steps(const model::ModelConfig& c, const model::ModelWeights& host_weights,
                             const model::LoraWeights* host_lora, const model::Batch& batch, int64_t B,
                             int64_t T, const model::ScheduleOptions& options, double dropout) {
  const DType dt = DType::BF16, gt = DType::F32;
  MemoryResource& memory = ops::memory_resource(Device::CUDA);
  const std::vector<model::LoraSpec> specs = host_lora ? host_lora->specs : std::vector<model::LoraSpec>{};
  Arena weights_arena(
      "weights", memory,
      model::weights_bytes(c, dt) + model::grads_bytes(c, gt) + 2 * model::lora_bytes(specs, gt));
  model::ModelWeights w = model::allocate_weights(c, dt, weights_arena);
  model::copy_weights(ctx, c, w, host_weights);
  model::ModelWeights g =
      model::allocate_grads(ctx, c, gt, weights_arena,
                            host_lora ? model::TrainableFn([](const model::WeightSpec&) { return false; })
                                      : model::TrainableFn(model::train_all));
  model::zero_grads(ctx, c, g);
  model::LoraWeights lora, lora_grads;
  if (host_lora) {
    lora = model::allocate_lora(c, specs, dt, weights_arena);
    model::copy_lora(ctx, lora, *host_lora);
    lora_grads = model::allocate_lora(c, specs, gt, weights_arena);
    model::zero_lora(ctx, lora_grads);
  }
  Arena acts("activations", memory, model::schedule_arena_bytes(c, dt, B, T, options, specs));
  std::unique_ptr<Arena> pinned;
  if (options.offload)
    pinned = std::make_unique<Arena>("offload", ops::staging_memory(Device::CUDA),
                                     model::schedule_offload_bytes(c, dt, B, T, options, specs));
  std::unique_ptr<model::Schedule> s =
      model::make_schedule(ctx, c, dt, B, T, options, acts, specs, pinned.get());
  const int64_t label_tokens = model::count_label_tokens(batch);
  Outcome o;
  ops::synchronize(ctx, Device::CUDA);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 2; ++step) {
    const model::LoraDropout drop{.p = dropout, .seed = 7, .step = step, .micro_batch = 0};
    o.losses.push_back(s->forward(w, batch, label_tokens, host_lora ? &lora : nullptr, drop));
    s->backward(w, g, host_lora ? &lora_grads : nullptr);
  }
  ops::synchronize(ctx, Device::CUDA);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (host_lora) {
    for (const model::LoraSpec& spec : specs)
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
        o.grads.emplace_back(model::lora_tensor_name(spec, which), to_f64(lora_grads.matrix(spec, which)));
  } else {
    for (const model::WeightSpec& spec : model::weight_specs(c))
      o.grads.emplace_back(spec.hf_name, to_f64(model::weight_of(g, spec)));
  }
  return o;
}

}  // namespace lt::test
