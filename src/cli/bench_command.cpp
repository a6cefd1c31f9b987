// `leantune bench` (on the CPU, or the GPU with --device cuda). One model (an HF directory, a config.json
// with random weights, or a built-in Llama of a few million parameters) and one batch of B full rows of T
// random tokens; for each mode (whole sequence, or chunks of C: one schedule, model/schedule.h) it runs
// --warmup untimed steps, then --trials timed steps, each a forward and a backward (full fine-tuning: every
// weight's gradient; LoRA: rank r adapters on all seven projections over a frozen base). Reported: the median
// forward, backward and step (forward + backward) times over the trials, tokens/s = B*T / median step, and
// the peak arena bytes (weights, gradients, adapters and the decoder's arena high-water). Gradients are not
// zeroed between steps: accumulation costs the same, and zeroing is not part of what is measured.
#include "cli/bench_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "core/philox.h"
#include "core/timer.h"
#include "io/hf_checkpoint.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/param_counts.h"
#include "model/schedule.h"
#include "model/weights.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "train/run_setup.h"

namespace lt::cli {

namespace {

struct BenchOptions {
  std::string model_dir;
  std::string config_file;
  bool random_init = false;
  std::string device = "cpu";
  int64_t seq_len = 512;
  int64_t batch = 1;
  int64_t chunk_size = 128;
  std::string recompute = "auto";  // auto: none whole, full chunked
  bool no_whole = false;
  bool offload = false;  // chunked runs: the checkpoints in page-locked host memory (ChunkedOptions::offload)
  bool layer_major = false;        // --schedule layer_major (model/schedule_layer_major.h)
  int64_t device_checkpoints = 0;  // layer_major with offload: the checkpoints kept on the device
  int64_t trials = 3;
  int64_t warmup = 1;
  std::string dtype = "fp32";
  std::string finetune = "full";
  int64_t lora_r = 8;
  bool show_chunk_time = false;
  std::string res_folder;
  uint64_t seed = 1;
};

// The built-in default: a Llama of D=256, L=4, V=32000 (about 19.6M parameters, 8.2M outside the embedding
// and the head), big enough that the head and the attention matter at T in the thousands.
model::ModelConfig default_config() {
  model::ModelConfig c;
  c.arch = model::Architecture::Llama;
  c.architecture_name = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 32000;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  return c;
}

// The MFU denominator: the H200's measured cuBLASLt bf16 GEMM ceiling (GPU.md), for every device and dtype.
constexpr double kPeakFlops = 803e12;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct TrialTime {
  double forward_s = 0, backward_s = 0;
};

struct ModeResult {
  std::string mode;        // "whole" or "chunked"
  int64_t chunk_size = 0;  // 0 for whole
  int64_t num_chunks = 1;
  double loss = 0;
  std::vector<TrialTime> trials;
  double forward_s = 0, backward_s = 0, step_s = 0, tokens_per_s = 0;
  size_t peak_arena_bytes = 0;     // weights + gradients + adapters + the decoder's high-water
  size_t decoder_arena_bytes = 0;  // the decoder's arena high-water alone
  double mfu = 0;                  // useful FLOPs per second over kPeakFlops
  size_t device_used_bytes = 0;    // GPU: device memory in use after the trials (arenas, libraries, context)
  std::vector<double> chunk_forward_s, chunk_backward_s;  // (num_chunks) medians over trials
};

// Everything one mode trains on; the same seeds give the same values in every mode.
struct Setup {
  const model::ModelConfig* config;
  DType dtype;
  const BenchOptions* options;
  std::vector<model::LoraSpec> lora_specs;    // empty: full fine-tuning
  std::optional<model::Recompute> recompute;  // none: the decoders' defaults
  model::Batch batch;
  int64_t label_tokens;
};

// The weights of the run, read or drawn on the host, on the bench's device in its dtype.
struct BenchWeights {
  std::unique_ptr<Arena> arena;
  model::ModelWeights weights;
};
BenchWeights load_weights(const ops::Context& ctx, const Setup& s, Device device) {
  const model::ModelConfig& c = *s.config;
  const BenchOptions& o = *s.options;
  Arena host("bench host weights", HostMemory::instance(), model::weights_bytes(c, s.dtype));
  model::ModelWeights hw = model::allocate_weights(c, s.dtype, host);
  if (!o.model_dir.empty() && !o.random_init)
    io::load_hf_weights(o.model_dir, c, hw);
  else
    model::init_random(ctx, c, hw, o.seed);
  BenchWeights b;
  b.arena = std::make_unique<Arena>("bench weights", ops::memory_resource(device),
                                    model::weights_bytes(c, s.dtype));
  b.weights = model::allocate_weights(c, s.dtype, *b.arena);
  model::copy_weights(ctx, c, b.weights, hw);
  return b;
}

// Useful FLOPs of one step (what MFU counts): every matmul weight (layers and head) 2 FLOPs per token
// forward, 2 backward for the input gradient and, when it trains, 2 for its own; LoRA's adapters likewise;
// causal attention 2 * B * H * T^2 * HD forward (QK^T and PV, half the square) and twice that backward.
// Recomputation (chunked training's second forward) is not useful work and is not counted.
double useful_flops(const model::ModelConfig& c, const std::vector<model::LoraSpec>& lora, int64_t B,
                    int64_t T) {
  double matmul = 0;
  for (const model::WeightSpec& spec : model::weight_specs(c))
    if (spec.shape.size() == 2 && spec.kind != model::WeightKind::Embed) matmul += double(spec.numel());
  if (c.tie_word_embeddings) matmul += double(c.vocab_size) * double(c.hidden_size);
  double adapters = 0;
  for (const model::LoraSpec& l : lora) adapters += double(l.rank) * double(l.in + l.out);
  const double tokens = double(B) * double(T);
  const double per_token = lora.empty() ? 6 * matmul : 4 * matmul + 6 * adapters;
  const double attention_fwd =
      2.0 * double(B) * double(c.num_heads) * double(T) * double(T) * double(c.head_dim);
  return per_token * tokens + 3 * attention_fwd * double(c.num_layers);
}

ModeResult run_mode(const ops::Context& ctx, const Setup& s, int64_t chunk) {
  const model::ModelConfig& c = *s.config;
  const BenchOptions& o = *s.options;
  const bool lora = !s.lora_specs.empty();
  const Device device = o.device == "cuda" ? Device::CUDA : Device::CPU;
  // Gradients and adapters in f32 under bf16, as the trainer keeps them; the adapters' compute copy in bf16.
  const DType master = train::master_dtype(s.dtype);
  const auto trainable = [&](const model::WeightSpec&) { return !lora; };
  const size_t param_bytes =
      model::grads_bytes(c, master, trainable) + 2 * model::lora_bytes(s.lora_specs, master) + 4096;
  BenchWeights bw = load_weights(ctx, s, device);
  const model::ModelWeights& w = bw.weights;
  Arena params("bench parameters", ops::memory_resource(device), param_bytes);
  model::ModelWeights g = model::allocate_grads(ctx, c, master, params, trainable);
  model::zero_grads(ctx, c, g);
  std::optional<model::LoraWeights> adapters, adapter_grads;
  if (lora) {
    Arena host("bench host adapters", HostMemory::instance(), model::lora_bytes(s.lora_specs, s.dtype));
    model::LoraWeights ha = model::allocate_lora(c, s.lora_specs, s.dtype, host);
    // B non-zero too, so that no product is skipped or trivially zero.
    model::init_lora(ha, model::LoraInit::NoInit, o.seed);
    adapters = model::allocate_lora(c, s.lora_specs, s.dtype, params);
    model::copy_lora(ctx, *adapters, ha);
    adapter_grads = model::allocate_lora(c, s.lora_specs, master, params);
    model::zero_lora(ctx, *adapter_grads);
  }

  ModeResult r;
  r.mode = chunk > 0 ? "chunked" : "whole";
  r.chunk_size = chunk;
  const int64_t B = o.batch, T = o.seq_len;
  // One schedule for both modes (recompute unset: none whole, full chunked).
  const model::ScheduleOptions options{
      .chunk_size = chunk,
      .order = o.layer_major ? model::ScheduleOrder::LayerMajor : model::ScheduleOrder::ChunkMajor,
      .device_checkpoints = o.device_checkpoints,
      .recompute = s.recompute,
      .offload = o.offload};
  Arena arena(r.mode == "whole" ? "bench whole" : "bench chunked", ops::memory_resource(device),
              model::schedule_arena_bytes(c, s.dtype, B, T, options, s.lora_specs));
  std::optional<Arena> pinned;  // --offload_activations: the chunked run's checkpoints
  if (o.offload)
    pinned.emplace("bench offloaded checkpoints", ops::staging_memory(device),
                   model::schedule_offload_bytes(c, s.dtype, B, T, options, s.lora_specs));
  std::unique_ptr<model::Schedule> schedule =
      model::make_schedule(ctx, c, s.dtype, B, T, options, arena, s.lora_specs, pinned ? &*pinned : nullptr);
  model::ChunkTiming timing;
  if (chunk > 0) {
    r.num_chunks = schedule->num_chunks();
    r.chunk_size = schedule->chunk_size();
    if (o.show_chunk_time) schedule->set_chunk_timing(&timing);
  }
  const model::LoraWeights* lw = adapters ? &*adapters : nullptr;
  model::LoraWeights* lg = adapter_grads ? &*adapter_grads : nullptr;
  std::vector<std::vector<double>> chunk_fwd(size_t(r.num_chunks)), chunk_bwd(size_t(r.num_chunks));
  for (int64_t i = 0; i < o.warmup + o.trials; ++i) {
    Timer timer;
    r.loss = schedule->forward(w, s.batch, s.label_tokens, lw);
    ops::synchronize(ctx, device);
    const double fwd = timer.seconds();
    timer.restart();
    schedule->backward(w, g, lg);
    ops::synchronize(ctx, device);
    const double bwd = timer.seconds();
    if (i < o.warmup) continue;
    r.trials.push_back({fwd, bwd});
    for (size_t k = 0; k < timing.forward_s.size(); ++k) {
      chunk_fwd[k].push_back(timing.forward_s[k]);
      chunk_bwd[k].push_back(timing.backward_s[k]);
    }
  }
  std::vector<double> f, b, step;
  for (const TrialTime& t : r.trials) {
    f.push_back(t.forward_s);
    b.push_back(t.backward_s);
    step.push_back(t.forward_s + t.backward_s);
  }
  r.forward_s = median(f);
  r.backward_s = median(b);
  r.step_s = median(step);
  r.tokens_per_s = double(B * T) / r.step_s;
  r.decoder_arena_bytes = arena.high_water();
  r.peak_arena_bytes = bw.arena->high_water() + params.high_water() + arena.high_water();
  r.mfu = useful_flops(c, s.lora_specs, B, T) / r.step_s / kPeakFlops;
  if (device == Device::CUDA) {
    const ops::DeviceMemoryInfo m = ops::device_memory_info(device);
    r.device_used_bytes = m.total_bytes - m.free_bytes;
  }
  if (o.show_chunk_time && chunk > 0) {
    for (size_t k = 0; k < chunk_fwd.size(); ++k) {
      r.chunk_forward_s.push_back(median(chunk_fwd[k]));
      r.chunk_backward_s.push_back(median(chunk_bwd[k]));
    }
  }
  return r;
}

void check_options(const BenchOptions& o) {
  LT_CHECK(o.device == "cpu" || o.device == "cuda", "bench: --device {}, expected cpu or cuda", o.device);
  if (o.device == "cuda") {
    LT_CHECK(ops::cuda_available(),
             "bench: --device cuda, but this build or machine has no GPU; use --device cpu");
    LT_CHECK(o.dtype == "bf16" || o.dtype == "fp16" || o.dtype == "fp32",
             "bench: --dtype {} on cuda, expected bf16, fp16 or fp32", o.dtype);
  } else {
    LT_CHECK(o.dtype == "fp32" || o.dtype == "fp64", "bench: --dtype {} on cpu, expected fp32 or fp64",
             o.dtype);
  }
  LT_CHECK(o.finetune == "full" || o.finetune == "lora", "bench: --finetune {}, expected full or lora",
           o.finetune);
  LT_CHECK(o.finetune != "lora" || o.lora_r >= 1, "bench: --lora_r {}, expected at least 1", o.lora_r);
  LT_CHECK(o.seq_len >= 2, "bench: --seq_len {}, expected at least 2 tokens", o.seq_len);
  LT_CHECK(o.batch >= 1, "bench: --batch {}, expected at least 1 row", o.batch);
  LT_CHECK(o.chunk_size >= 0, "bench: --chunk_size {}, expected >= 0 (0: whole sequence only)", o.chunk_size);
  LT_CHECK(o.recompute == "auto" || model::recompute_from_name(o.recompute).has_value(),
           "bench: --recompute {}, expected auto, none, full, selective, elementwise or norms", o.recompute);
  LT_CHECK(o.trials >= 1, "bench: --trials {}, expected at least 1", o.trials);
  LT_CHECK(o.warmup >= 0, "bench: --warmup {}, expected >= 0", o.warmup);
  LT_CHECK(!(o.no_whole && o.chunk_size == 0),
           "bench: --no_whole with --chunk_size 0 leaves nothing to run; give --chunk_size C > 0");
  LT_CHECK(!o.offload || (o.chunk_size > 0 && o.no_whole),
           "bench: --offload_activations applies to chunked runs only; give --chunk_size C > 0 and "
           "--no_whole");
  LT_CHECK(!o.show_chunk_time || o.chunk_size > 0,
           "bench: --show_chunk_time needs chunked training (--chunk_size C > 0), got --chunk_size 0");
  LT_CHECK(o.config_file.empty() || o.model_dir.empty(),
           "bench: give either --model_name {} or --config {}, not both", o.model_dir, o.config_file);
  LT_CHECK(o.config_file.empty() || o.random_init,
           "bench: --config {} has no weights; add --random_init (or give --model_name DIR)", o.config_file);
}

std::string model_description(const BenchOptions& o) {
  if (!o.model_dir.empty()) return o.random_init ? o.model_dir + " (random init)" : o.model_dir;
  if (!o.config_file.empty()) return o.config_file + " (random init)";
  return "built-in Llama D=256 L=4 H=4 F=688 V=32000 (random init)";
}

nlohmann::json to_json(const ModeResult& r) {
  nlohmann::json j;
  j["mode"] = r.mode;
  j["chunk_size"] = r.chunk_size;
  j["num_chunks"] = r.num_chunks;
  j["loss"] = r.loss;
  j["trials"] = nlohmann::json::array();
  for (const TrialTime& t : r.trials)
    j["trials"].push_back(
        {{"forward_s", t.forward_s}, {"backward_s", t.backward_s}, {"step_s", t.forward_s + t.backward_s}});
  j["median_forward_s"] = r.forward_s;
  j["median_backward_s"] = r.backward_s;
  j["median_step_s"] = r.step_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["peak_arena_bytes"] = r.peak_arena_bytes;
  j["decoder_arena_bytes"] = r.decoder_arena_bytes;
  j["mfu"] = r.mfu;
  j["device_used_bytes"] = r.device_used_bytes;
  if (!r.chunk_forward_s.empty()) {
    j["chunk_times"] = nlohmann::json::array();
    for (size_t k = 0; k < r.chunk_forward_s.size(); ++k)
      j["chunk_times"].push_back({{"chunk", k},
                                  {"median_forward_s", r.chunk_forward_s[k]},
                                  {"median_backward_s", r.chunk_backward_s[k]}});
  }
  return j;
}

int run_bench(const BenchOptions& o) {
  const ops::Context ctx;  // the command's ops: the default kernels with the environment's overrides
  check_options(o);
  const model::ModelConfig config = !o.model_dir.empty()     ? model::load_model_config(o.model_dir)
                                    : !o.config_file.empty() ? model::load_model_config(o.config_file)
                                                             : default_config();
  const DType dt = train::compute_dtype(o.dtype);
  const int64_t B = o.batch, T = o.seq_len;

  Setup s{.config = &config,
          .dtype = dt,
          .options = &o,
          .lora_specs = {},
          .recompute = {},
          .batch = {},
          .label_tokens = 0};
  if (o.recompute != "auto") s.recompute = model::recompute_from_name(o.recompute);
  if (o.finetune == "lora") {
    s.lora_specs = model::lora_specs(config, [&](const std::string&) {
      return std::optional<model::LoraModuleSetting>(
          model::LoraModuleSetting{.rank = o.lora_r, .alpha = double(2 * o.lora_r)});
    });
  }
  // Full rows of random tokens: every position has a target but the last of each row.
  std::vector<int32_t> ids(size_t(B * T)), positions(size_t(B * T));  // (B, T) each
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const size_t i = size_t(b * T + t);
      ids[i] = int32_t(std::min<int64_t>(
          config.vocab_size - 1, int64_t(philox_uniform_double(o.seed, 7, i) * double(config.vocab_size))));
      positions[i] = int32_t(t);
    }
  }
  s.batch.input_ids = Tensor(ids.data(), DType::I32, {B, T});
  s.batch.positions = Tensor(positions.data(), DType::I32, {B, T});
  s.batch.labels = s.batch.input_ids;
  s.label_tokens = model::count_label_tokens(s.batch);

  const model::ParamCounts counts = model::count_params(config);
  fmt::print(
      "bench: {} ({} parameters), {}, {} fine-tuning{}, B={} T={}, {} warm-up + {} timed steps, device "
      "{}\n",
      model_description(o), counts.total(), o.dtype, o.finetune,
      o.finetune == "lora" ? fmt::format(" r={} (all seven projections)", o.lora_r) : "", B, T, o.warmup,
      o.trials,
      o.device == "cuda" ? ops::device_description(Device::CUDA)
                         : fmt::format("cpu ({} hardware threads)", std::thread::hardware_concurrency()));

  std::vector<ModeResult> results;
  if (!o.no_whole) results.push_back(run_mode(ctx, s, 0));
  if (o.chunk_size > 0) results.push_back(run_mode(ctx, s, o.chunk_size));

  fmt::print("\n{:<14} {:>10} {:>11} {:>10} {:>11} {:>7} {:>12} {:>12} {:>12}\n", "mode", "forward s",
             "backward s", "step s", "tokens/s", "MFU", "peak memory", "(decoder)", "GPU in use");
  for (const ModeResult& r : results) {
    const std::string mode = r.mode == "whole"
                                 ? "whole"
                                 : fmt::format("{} {}{}", o.layer_major ? "layer-major" : "chunked",
                                               r.chunk_size, o.offload ? "+off" : "");
    fmt::print("{:<14} {:>10.4f} {:>11.4f} {:>10.4f} {:>11.1f} {:>6.1f}% {:>12} {:>12} {:>12}\n", mode,
               r.forward_s, r.backward_s, r.step_s, r.tokens_per_s, 100 * r.mfu,
               format_bytes(double(r.peak_arena_bytes)), format_bytes(double(r.decoder_arena_bytes)),
               r.device_used_bytes ? format_bytes(double(r.device_used_bytes)) : std::string("-"));
  }
  fmt::print(
      "(medians over {} trials; peak memory = weights, gradients, adapters and the decoder's arena "
      "high-water; MFU = useful FLOPs / 803 TFLOP/s)\n",
      o.trials);
  for (const ModeResult& r : results) {
    if (r.chunk_forward_s.empty()) continue;
    fmt::print("\nper-chunk times, chunked {} (medians; backward runs the chunks in reverse):\n",
               r.chunk_size);
    fmt::print("{:>6} {:>11} {:>11}\n", "chunk", "forward s", "backward s");
    for (size_t k = 0; k < r.chunk_forward_s.size(); ++k)
      fmt::print("{:>6} {:>11.4f} {:>11.4f}\n", k, r.chunk_forward_s[k], r.chunk_backward_s[k]);
  }

  if (!o.res_folder.empty()) {
    std::filesystem::create_directories(o.res_folder);
    nlohmann::json j;
    j["settings"] = {{"model", model_description(o)},
                     {"parameters", counts.total()},
                     {"hidden_size", config.hidden_size},
                     {"num_layers", config.num_layers},
                     {"vocab_size", config.vocab_size},
                     {"device", o.device},
                     {"hardware_threads", std::thread::hardware_concurrency()},
                     {"dtype", o.dtype},
                     {"finetune", o.finetune},
                     {"lora_r", o.finetune == "lora" ? o.lora_r : 0},
                     {"seq_len", T},
                     {"batch", B},
                     {"chunk_size", o.chunk_size},
                     {"recompute", o.recompute},
                     {"offload_activations", o.offload},
                     {"trials", o.trials},
                     {"warmup", o.warmup},
                     {"seed", o.seed}};
    j["results"] = nlohmann::json::array();
    for (const ModeResult& r : results) j["results"].push_back(to_json(r));
    const std::string path = o.res_folder + "/bench_results.json";
    std::ofstream out(path);
    LT_CHECK(out.good(), "bench: cannot write {}", path);
    out << j.dump(2) << "\n";
    LT_CHECK(out.good(), "bench: writing {} failed", path);
    fmt::print("\nresults: {}\n", path);
  }
  return 0;
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench", "time training steps: whole-sequence vs chunked training on the same model and data");
  // train's names first (base_model, cutoff_len, micro_batch_size, precision); the bench's own are aliases.
  bench->add_option("--base_model,--model_name", o->model_dir,
                    "an HF model directory (config.json + safetensors)");
  bench->add_option("--config", o->config_file, "a config.json (with --random_init)");
  bench->add_flag("--random_init", o->random_init, "random weights (HF's init) instead of loading them");
  bench->add_option("--device", o->device, "cpu or cuda")->capture_default_str();
  bench->add_option("--cutoff_len,--seq_len", o->seq_len, "tokens per row T")->capture_default_str();
  bench->add_option("--micro_batch_size,--batch", o->batch, "rows B")->capture_default_str();
  bench->add_option("--chunk_size", o->chunk_size, "chunk size C of chunked training (0: whole only)")
      ->capture_default_str();
  bench->add_flag("--no_whole", o->no_whole, "skip the whole-sequence run");
  bench->add_flag_function(
      "--layer_major", [o](int64_t) { o->layer_major = true; },
      "chunked runs: the layer-major schedule (one layer's K/V; `info --plan --schedule layer_major` sizes "
      "it)");
  bench
      ->add_option(
          "--device_checkpoints", o->device_checkpoints,
          "--layer_major with --offload_activations: layer-input checkpoints kept on the device (the "
          "rest in host memory; `info --plan` picks it)")
      ->capture_default_str();
  bench->add_flag("--offload_activations", o->offload,
                  "chunked runs (with --no_whole): the layer-input checkpoints in page-locked host memory");
  bench
      ->add_option("--recompute", o->recompute,
                   "auto (none whole, full chunked), none, full, selective, elementwise or norms")
      ->capture_default_str();
  bench->add_option("--trials", o->trials, "timed steps per mode")->capture_default_str();
  bench->add_option("--warmup", o->warmup, "untimed steps per mode before the trials")->capture_default_str();
  bench->add_option("--precision,--dtype", o->dtype, "fp32 or fp64 (cpu); bf16 or fp32 (cuda)")
      ->capture_default_str();
  bench->add_option("--finetune", o->finetune, "full or lora")->capture_default_str();
  bench->add_option("--lora_r", o->lora_r, "LoRA rank (all seven projections, alpha 2r)")
      ->capture_default_str();
  bench->add_flag("--show_chunk_time", o->show_chunk_time, "per-chunk forward and backward times");
  bench->add_option("--res_folder", o->res_folder, "write bench_results.json there");
  bench->add_option("--seed", o->seed, "seed of the weights and tokens")->capture_default_str();
  bench->callback([o] {
    const int rc = run_bench(*o);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace lt::cli
