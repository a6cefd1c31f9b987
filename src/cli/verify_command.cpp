// `leantune verify chunked`. Each trial draws an architecture (tiny random Llama / Qwen2 / Mistral, or the
// model given by --model_name), a batch (rows of different lengths, packed or not), a sequence length, a
// chunk size (1, a size that does not divide T, one larger than T, or any other) and a training mode (full,
// or partial: a random subset of the weights frozen), then runs the decoder over the whole sequence (plain
// head) and the chunked decoder (fused head), and compares the loss and each trainable gradient:
//   fail when max|chunked - whole| > atol + rtol * max|whole|   (per tensor, normwise)
// It prints one line per trial with its worst tensor, a table of the worst error per tensor kind, and
// exits non-zero when any trial fails. LoRA trials adapt a random subset of the projections (random ranks,
// random non-zero A and B, sometimes LoRA dropout) over a frozen base and compare the adapters' gradients.
#include "cli/verify_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "core/philox.h"
#include "io/hf_checkpoint.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/random_model.h"
#include "model/schedule.h"
#include "model/weights.h"

namespace lt::cli {

namespace {

struct VerifyOptions {
  std::string model_dir;
  std::string dtype = "fp64";
  int64_t trials = 20;
  int64_t seq_len = 0;             // 0: random per trial
  int64_t chunk_size = -1;         // -1: random per trial
  std::vector<double> tolerances;  // RTOL ATOL; default by dtype
  uint64_t seed = 1;
  bool layer_major = false;  // the chunked side on the layer-major schedule (model/schedule_layer_major.h)
};

int64_t draw(uint64_t seed, uint64_t stream, uint64_t index, int64_t lo, int64_t hi) {
  return std::min(hi, lo + int64_t(philox_uniform_double(seed, stream, index) * double(hi - lo + 1)));
}

// The kind of a weight without its layer: "self_attn.q_proj.weight", "embed_tokens.weight", ...
std::string kind_name(const model::WeightSpec& s) {
  const std::string& n = s.hf_name;
  if (s.layer < 0) return n.rfind("model.", 0) == 0 ? n.substr(6) : n;
  const std::string prefix = fmt::format("model.layers.{}.", s.layer);
  return n.rfind(prefix, 0) == 0 ? n.substr(prefix.size()) : n;
}

struct Difference {
  double abs = 0, rel = 0;
  bool failed = false;
};

Difference compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  std::vector<double> a(size_t(got.numel())), b(size_t(want.numel()));
  convert_elements(a.data(), DType::F64, got.data, got.dtype, a.size());
  convert_elements(b.data(), DType::F64, want.data, want.dtype, b.size());
  double max_diff = 0, max_want = 0;
  bool finite = true;
  for (size_t i = 0; i < a.size(); ++i) {
    finite = finite && std::isfinite(a[i]) && std::isfinite(b[i]);
    max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
    max_want = std::max(max_want, std::abs(b[i]));
  }
  return {max_diff, max_diff / std::max(max_want, 1e-300), !finite || max_diff > atol + rtol * max_want};
}

struct Trial {
  std::string arch, mode;
  int64_t rows = 0, tokens = 0, chunk = 0;
  bool packed = false;
  double loss = 0;
  Difference loss_diff, worst;
  std::string worst_name;
  bool failed = false;
};

int run_verify_chunked(const VerifyOptions& o) {
  const ops::Context ctx;  // the command's ops: the default kernels with the environment's overrides
  LT_CHECK(o.dtype == "fp64" || o.dtype == "fp32", "verify chunked: --dtype {}, expected fp64 or fp32",
           o.dtype);
  const DType dt = o.dtype == "fp64" ? DType::F64 : DType::F32;
  LT_CHECK(o.trials > 0, "verify chunked: --trials {}, expected at least 1", o.trials);
  LT_CHECK(o.seq_len >= 0, "verify chunked: --seq_len {}, expected a positive length (or 0: random)",
           o.seq_len);
  LT_CHECK(o.chunk_size >= -1, "verify chunked: --chunk_size {}, expected >= 0 (0: whole sequence)",
           o.chunk_size);
  LT_CHECK(o.tolerances.empty() || o.tolerances.size() == 2,
           "verify chunked: --tolerances takes two numbers (RTOL ATOL), got {}", o.tolerances.size());
  const double rtol = o.tolerances.empty() ? (dt == DType::F64 ? 1e-9 : 1e-3) : o.tolerances[0];
  const double atol = o.tolerances.empty() ? (dt == DType::F64 ? 1e-12 : 1e-6) : o.tolerances[1];
  LT_CHECK(rtol >= 0 && atol >= 0, "verify chunked: tolerances {} {} must not be negative", rtol, atol);

  std::optional<model::ModelConfig> given;
  if (!o.model_dir.empty()) given = model::load_model_config(o.model_dir);
  fmt::print("verify chunked: {} trials, {}, rtol {:g} atol {:g}, seed {}; model: {}\n", o.trials, o.dtype,
             rtol, atol, o.seed, given ? o.model_dir : std::string("tiny random Llama/Qwen2/Mistral"));
  fmt::print("modes: full fine-tuning, partial (a random third of the weights frozen), LoRA (frozen base)\n");

  std::map<std::string, double> worst_by_kind;  // normwise relative error per weight kind ("loss" too)
  std::vector<Trial> trials;
  int64_t failures = 0;
  for (int64_t t = 0; t < o.trials; ++t) {
    const uint64_t ts = o.seed * 1000003ULL + uint64_t(t);
    const auto arch = model::Architecture(draw(ts, 10, 0, 0, 2));
    const model::ModelConfig config = given ? *given : model::tiny_random_config(arch, ts);
    Trial tr;
    tr.arch = model::architecture_name(config.arch);
    tr.rows = draw(ts, 10, 1, 1, 3);
    tr.tokens = o.seq_len > 0 ? o.seq_len : draw(ts, 10, 2, 1, 24);
    const int64_t T = tr.tokens;
    if (o.chunk_size >= 0) {
      tr.chunk = o.chunk_size;
    } else {
      switch (draw(ts, 10, 3, 0, 3)) {
        case 0:
          tr.chunk = 1;
          break;
        case 1:
          tr.chunk = T + draw(ts, 10, 4, 1, 8);
          break;   // larger than the sequence
        case 2: {  // does not divide T, when T allows
          tr.chunk = std::max<int64_t>(1, T / 2 + 1);
          while (tr.chunk < T && T % tr.chunk == 0) ++tr.chunk;
          break;
        }
        default:
          tr.chunk = draw(ts, 10, 5, 1, std::max<int64_t>(1, T));
          break;
      }
    }
    tr.packed = draw(ts, 10, 6, 0, 1) == 1;
    const int64_t mode = draw(ts, 10, 7, 0, 2);
    const bool partial = mode == 1, use_lora = mode == 2;
    tr.mode = use_lora ? "lora" : partial ? "partial" : "full";

    const std::vector<model::WeightSpec> specs = model::weight_specs(config);
    std::vector<bool> train(specs.size(), true);
    if (partial) {
      for (size_t i = 0; i < specs.size(); ++i)
        train[i] = draw(ts, 11, i, 0, 2) != 0;  // about a third frozen
    }
    if (use_lora) train.assign(specs.size(), false);
    const model::TrainableFn trainable = [&](const model::WeightSpec& s) {
      for (size_t i = 0; i < specs.size(); ++i)
        if (specs[i].hf_name == s.hf_name) return bool(train[i]);
      return true;
    };
    std::vector<model::LoraSpec> lora_specs;
    if (use_lora) {
      uint64_t module_index = 0;
      lora_specs =
          model::lora_specs(config, [&](const std::string& path) -> std::optional<model::LoraModuleSetting> {
            const uint64_t i = module_index++;
            const bool always = path.find("layers.0.self_attn.q_proj") != std::string::npos;
            if (!always && draw(ts, 12, i, 0, 2) == 0) return std::nullopt;
            return model::LoraModuleSetting{.rank = draw(ts, 13, i, 1, 3),
                                            .alpha = double(draw(ts, 14, i, 1, 16)),
                                            .use_rslora = draw(ts, 15, i, 0, 1) == 1};
          });
    }
    const model::LoraDropout dropout{.p = use_lora && draw(ts, 10, 8, 0, 1) == 1 ? 0.1 : 0.0, .seed = ts};

    const model::ScheduleOptions whole_options{},
        chunked_options{
            .chunk_size = tr.chunk,
            .order = o.layer_major ? model::ScheduleOrder::LayerMajor : model::ScheduleOrder::ChunkMajor};
    const size_t bytes = model::weights_bytes(config, dt) + 2 * model::grads_bytes(config, dt, trainable) +
                         3 * model::lora_bytes(lora_specs, dt) +
                         model::schedule_arena_bytes(config, dt, tr.rows, T, whole_options, lora_specs) +
                         model::schedule_arena_bytes(config, dt, tr.rows, T, chunked_options, lora_specs) +
                         4096;
    Arena arena("verify", HostMemory::instance(), bytes);
    model::ModelWeights w = model::allocate_weights(config, dt, arena);
    if (given)
      io::load_hf_weights(o.model_dir, config, w);
    else
      model::fill_weights_uniform(config, w, ts);
    model::ModelWeights g_whole = model::allocate_grads(ctx, config, dt, arena, trainable);
    model::ModelWeights g_chunk = model::allocate_grads(ctx, config, dt, arena, trainable);
    std::optional<model::LoraWeights> lora, lora_g_whole, lora_g_chunk;
    if (use_lora) {
      lora = model::allocate_lora(config, lora_specs, dt, arena);
      for (size_t i = 0; i < lora_specs.size(); ++i) {
        for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
          Tensor& m = lora->matrix(lora_specs[i], which);
          std::vector<double> v(size_t(m.numel()));  // (numel) uniform, scaled by the fan-in
          for (size_t j = 0; j < v.size(); ++j)
            v[j] = (2.0 * philox_uniform_double(ts, 200 + 2 * i + (which == model::LoraMatrix::B), j) - 1.0) /
                   std::sqrt(double(m.dim(1)));
          convert_elements(m.data, m.dtype, v.data(), DType::F64, v.size());
        }
      }
      lora_g_whole = model::allocate_lora(config, lora_specs, dt, arena);
      lora_g_chunk = model::allocate_lora(config, lora_specs, dt, arena);
      model::zero_lora(ctx, *lora_g_whole);
      model::zero_lora(ctx, *lora_g_chunk);
    }
    const model::LoraWeights* lora_ptr = lora ? &*lora : nullptr;
    model::RandomBatch data = model::random_batch(tr.rows, T, config.vocab_size, tr.packed, ts);
    const model::Batch batch = data.batch();
    // A batch with no target at all (rows of one token) has zero loss and gradients on both sides; the
    // denominator must still be positive.
    const int64_t label_tokens = std::max<int64_t>(1, model::count_label_tokens(batch));

    const std::unique_ptr<model::Schedule> whole =
        model::make_schedule(ctx, config, dt, tr.rows, T, whole_options, arena, lora_specs);
    const double loss_whole = whole->forward(w, batch, label_tokens, lora_ptr, dropout);
    whole->backward(w, g_whole, lora_g_whole ? &*lora_g_whole : nullptr);
    const std::unique_ptr<model::Schedule> chunked =
        model::make_schedule(ctx, config, dt, tr.rows, T, chunked_options, arena, lora_specs);
    const double loss_chunk = chunked->forward(w, batch, label_tokens, lora_ptr, dropout);
    chunked->backward(w, g_chunk, lora_g_chunk ? &*lora_g_chunk : nullptr);

    tr.loss = loss_whole;
    const double loss_abs = std::abs(loss_chunk - loss_whole);
    tr.loss_diff = {loss_abs, loss_abs / std::max(std::abs(loss_whole), 1e-300),
                    !std::isfinite(loss_chunk) || loss_abs > atol + rtol * std::abs(loss_whole)};
    tr.failed = tr.loss_diff.failed;
    worst_by_kind["loss"] = std::max(worst_by_kind["loss"], tr.loss_diff.rel);
    tr.worst_name = "loss";
    tr.worst = tr.loss_diff;
    for (const model::WeightSpec& s : specs) {
      const Tensor& a = model::weight_of(g_chunk, s);
      const Tensor& b = model::weight_of(g_whole, s);
      if (a.empty() || b.empty()) continue;
      const Difference d = compare(a, b, rtol, atol);
      double& k = worst_by_kind[kind_name(s)];
      k = std::max(k, d.rel);
      if (d.failed && !tr.failed) tr.worst_name = s.hf_name, tr.worst = d;
      if (!tr.failed && d.rel > tr.worst.rel) tr.worst_name = s.hf_name, tr.worst = d;
      tr.failed = tr.failed || d.failed;
    }
    for (const model::LoraSpec& ls : lora_specs) {
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
        const char* suffix = which == model::LoraMatrix::A ? "lora_A" : "lora_B";
        const Difference d =
            compare(lora_g_chunk->matrix(ls, which), lora_g_whole->matrix(ls, which), rtol, atol);
        double& k = worst_by_kind[fmt::format("{}.{}", model::lora_module_name(ls.module), suffix)];
        k = std::max(k, d.rel);
        const std::string name = fmt::format("{}.{}", ls.module_path, suffix);
        if (d.failed && !tr.failed) tr.worst_name = name, tr.worst = d;
        if (!tr.failed && d.rel > tr.worst.rel) tr.worst_name = name, tr.worst = d;
        tr.failed = tr.failed || d.failed;
      }
    }
    failures += tr.failed;
    fmt::print(
        "trial {:3d} {:<20} {:<7} B={} T={:<3} C={:<3} {:<7} loss {:.6f}  worst {} rel {:.2e} abs {:.2e}{}\n",
        t, tr.arch, tr.mode, tr.rows, T, tr.chunk, tr.packed ? "packed" : "padded", tr.loss, tr.worst_name,
        tr.worst.rel, tr.worst.abs, tr.failed ? "  FAIL" : "");
  }
  fmt::print("\nworst normwise relative error (max|chunked - whole| / max|whole|) per tensor kind:\n");
  for (const auto& [kind, rel] : worst_by_kind) fmt::print("  {:<40} {:.3e}\n", kind, rel);
  if (failures > 0) {
    fmt::print("{} of {} trials FAILED\n", failures, o.trials);
    return 1;
  }
  fmt::print("all {} trials passed\n", o.trials);
  return 0;
}

}  // namespace

void register_verify_command(CLI::App& app) {
  CLI::App* verify = app.add_subcommand("verify", "check the engine against itself");
  verify->require_subcommand(1);
  auto opts = std::make_shared<VerifyOptions>();
  CLI::App* chunked = verify->add_subcommand(
      "chunked", "chunked sequence training vs whole-sequence training: loss and every trainable gradient");
  chunked->add_option("--model_name", opts->model_dir,
                      "a model directory (config.json + safetensors); "
                      "default: tiny random Llama/Qwen2/Mistral models");
  chunked->add_option("--dtype", opts->dtype, "fp64 or fp32")->capture_default_str();
  chunked->add_option("--trials", opts->trials, "number of random trials")->capture_default_str();
  chunked->add_option("--seq_len", opts->seq_len, "sequence length (default: random 1..24)");
  chunked->add_option("--chunk_size", opts->chunk_size, "chunk size, 0 = whole (default: random per trial)");
  chunked
      ->add_option("--tolerances", opts->tolerances,
                   "RTOL ATOL (default 1e-9 1e-12 for fp64, 1e-3 1e-6 for fp32)")
      ->expected(2);
  chunked->add_option("--seed", opts->seed, "seed of the trials")->capture_default_str();
  chunked->add_flag("--layer_major", opts->layer_major,
                    "the chunked side runs the layer-major schedule (layers outside, chunks inside)");
  chunked->callback([opts] {
    const int rc = run_verify_chunked(*opts);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lt::cli
