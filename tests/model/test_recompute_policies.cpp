// Activation recomputation policies (none, full, selective, elementwise, norms) give bit-identical losses and
// gradients — the recomputed activations are the same deterministic ops on the same inputs — for the
// whole-sequence decoder and the chunked one, with full fine-tuning and with LoRA (dropout included); and
// each policy keeps what it says: full < selective < elementwise < norms < none in activation memory
// (elementwise exactly none less the norm outputs, their rstds and h; norms exactly elementwise plus every
// layer's h), the arena's high-water equal to the plan.
#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <string>

#include "lora_test_util.h"
#include "model/chunked_decoder.h"
#include "model/memory_plan.h"
#include "model_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

using model::Recompute;

constexpr Recompute kPolicies[] = {Recompute::None, Recompute::Full, Recompute::Selective,
                                   Recompute::Elementwise, Recompute::Norms};
constexpr int kPolicyCount = int(std::size(kPolicies));

struct Outcome {
  double loss = 0;
  std::vector<std::vector<char>> grads;  // raw bytes of every gradient: compared bit for bit
  size_t arena_high_water = 0, planned = 0;
};

using test::bytes_of;

// One forward/backward of the tiny model (LoRA on every projection when `lora`, base trained otherwise).
// chunk 0: Decoder; otherwise ChunkedDecoder of that chunk size.
// F > 0 replaces the tiny model's intermediate size.
Outcome run(DType dt, bool lora, double dropout, int64_t chunk, Recompute policy, bool offload = false,
            int64_t F = 0, const std::vector<std::string>& offload_only = {}, bool qk_norm = false,
            bool fused = false) {
  constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
  test::TinyLoraModel m(dt, !lora, 71, B, T, F, qk_norm, fused);
  test::TinyBatch data;
  const model::Batch batch = data.batch(true);
  const int64_t label_tokens = model::count_label_tokens(batch);
  const model::LoraDropout drop{.p = dropout, .seed = 9, .step = 4, .micro_batch = 0};
  const std::vector<model::LoraSpec> specs = lora ? m.specs : std::vector<model::LoraSpec>{};
  const model::LoraWeights* lw = lora ? &m.lora : nullptr;
  model::LoraWeights* lg = lora ? &m.lora_grads : nullptr;
  Outcome o;
  if (chunk == 0) {
    model::DecoderOptions options(policy);
    options.offload_only = offload_only;
    o.planned = model::Decoder::arena_bytes(m.config, dt, B, T, specs, options, offload);
    Arena arena("policy", HostMemory::instance(), o.planned);
    Arena host("offload", HostMemory::instance(),
               std::max<size_t>(model::Decoder::offload_bytes(m.config, dt, B, T, specs, options), 1));
    model::Decoder d(ctx, m.config, dt, B, T, arena, specs, options, offload ? &host : nullptr);
    o.loss = d.forward(m.weights, batch, label_tokens, lw, drop);
    d.backward(m.weights, m.grads, lg);
    o.arena_high_water = arena.high_water();
  } else {
    const model::ChunkedOptions options{
        .chunk_size = chunk, .loss_token_block = 4, .loss_vocab_block = 3, .recompute = policy};
    o.planned = model::ChunkedDecoder::arena_bytes(m.config, dt, B, T, options, specs);
    Arena arena("policy", HostMemory::instance(), o.planned);
    model::ChunkedDecoder d(ctx, m.config, dt, B, T, options, arena, specs);
    o.loss = d.forward(m.weights, batch, label_tokens, lw, drop);
    d.backward(m.weights, m.grads, lg);
    o.arena_high_water = arena.high_water();
  }
  if (lora) {
    for (const model::LoraSpec& s : m.specs)
      for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B})
        o.grads.push_back(bytes_of(m.lora_grads.matrix(s, which)));
  } else {
    for (const model::WeightSpec& s : model::weight_specs(m.config))
      o.grads.push_back(bytes_of(model::weight_of(m.grads, s)));
  }
  return o;
}

void expect_policies_identical(DType dt, bool lora, double dropout, int64_t chunk, int64_t F = 0,
                               bool qk_norm = false, bool fused = false) {
  const Outcome ref = run(dt, lora, dropout, chunk, Recompute::None, false, F, {}, qk_norm, fused);
  for (int variant = 0; variant < (chunk == 0 ? 2 : 1) * kPolicyCount; ++variant) {
    const Recompute p = kPolicies[variant % kPolicyCount];
    const bool offload = variant >= kPolicyCount;  // the whole-sequence decoder, kept activations offloaded
    const Outcome o = run(dt, lora, dropout, chunk, p, offload, F, {}, qk_norm, fused);
    const std::string what =
        fmt::format("{}{} {} lora={} dropout={} chunk={} F={} qk_norm={} fused={}", model::recompute_name(p),
                    offload ? "+offload" : "", dtype_name(dt), lora, dropout, chunk, F, qk_norm, fused);
    EXPECT_EQ(o.loss, ref.loss) << what;
    ASSERT_EQ(o.grads.size(), ref.grads.size()) << what;
    for (size_t i = 0; i < ref.grads.size(); ++i)
      EXPECT_EQ(o.grads[i], ref.grads[i]) << what << " gradient " << i;
    // The plan is the arena: arena_bytes reserves one alignment's slack for an unaligned arena start and
    // rounds the last buffer up, which the high-water mark does not.
    EXPECT_LE(o.arena_high_water, o.planned) << what;
    EXPECT_LE(o.planned - o.arena_high_water, 2 * model::kArenaAlignment) << what;
  }
  if (chunk != 0) return;
  // Only some kept activations offloaded (DecoderOptions::offload_only), the rest on the device: the same
  // bits too, and less device memory than keeping all (more than offloading all).
  // {q, h}: Norms' h in host memory, with dAttn/dQ placed in its device slot when they fit (F = 48).
  const std::vector<std::vector<std::string>> subsets{
      {"q"}, {"gate", "lora_t"}, {"mid", "attn_out", "k"}, {"q", "h"}, {"h"}};
  for (const Recompute p : kPolicies)
    for (const std::vector<std::string>& only : subsets) {
      const Outcome o = run(dt, lora, dropout, chunk, p, true, F, only, qk_norm, fused);
      const std::string what =
          fmt::format("{}+offload[{}] {} lora={} dropout={} F={}", model::recompute_name(p),
                      fmt::join(only, ","), dtype_name(dt), lora, dropout, F);
      EXPECT_EQ(o.loss, ref.loss) << what;
      ASSERT_EQ(o.grads.size(), ref.grads.size()) << what;
      for (size_t i = 0; i < ref.grads.size(); ++i)
        EXPECT_EQ(o.grads[i], ref.grads[i]) << what << " gradient " << i;
      EXPECT_LE(o.arena_high_water, o.planned) << what;
    }
}

// Bit for bit whatever OpenBLAS's kernels: a policy only decides which activations are kept and which are
// recomputed, and a recompute repeats the forward's BLAS calls with the same shapes and values.
// The tiny model's F = 12 (D = 8, H * HD = 24); F = 48 >= 2 * H * HD also puts Elementwise's dAttn and dQ
// in h's buffer, F = 6 < D gives its norm outputs a buffer of their own.
TEST(RecomputePolicies, WholeSequenceGradientsAreBitIdentical) {
  for (DType dt : {DType::F64, DType::F32})
    for (int64_t F : {0, 48, 6}) {
      expect_policies_identical(dt, false, 0, 0, F);
      expect_policies_identical(dt, true, 0, 0, F);
      expect_policies_identical(dt, true, 0.25, 0, F);
    }
}

TEST(RecomputePolicies, ChunkedGradientsAreBitIdentical) {
  for (DType dt : {DType::F64, DType::F32})
    for (int64_t chunk : {1, 3, 7}) {
      expect_policies_identical(dt, false, 0, chunk);
      expect_policies_identical(dt, true, 0.25, chunk);
    }
}

// Six layers: whole-sequence Selective has one layer's worth of shared buffers (norm outputs, gate, up, h)
// that Elementwise does without, so with two layers Elementwise (gate and up per layer) would be the smaller.
// Per-head q/k norms (Qwen3's block) keep their inputs and rstds with q, or recompute them with it.
TEST(RecomputePolicies, QkNormGradientsAreBitIdentical) {
  for (DType dt : {DType::F64, DType::F32}) {
    expect_policies_identical(dt, false, 0, 0, 48, true);
    expect_policies_identical(dt, true, 0.25, 0, 0, true);
    for (int64_t chunk : {1, 3}) {
      expect_policies_identical(dt, false, 0, chunk, 0, true);
      expect_policies_identical(dt, true, 0.25, chunk, 0, true);
    }
  }
}

// Phi-3's fused weights (parts as row views) and fused adapters (one t per module, kept or recomputed with
// the first part's).
TEST(RecomputePolicies, FusedModulesGradientsAreBitIdentical) {
  for (DType dt : {DType::F64, DType::F32}) {
    expect_policies_identical(dt, false, 0, 0, 48, false, true);
    expect_policies_identical(dt, true, 0.25, 0, 0, false, true);
    for (int64_t chunk : {1, 3}) {
      expect_policies_identical(dt, false, 0, chunk, 0, false, true);
      expect_policies_identical(dt, true, 0.25, chunk, 0, false, true);
    }
  }
}

TEST(RecomputePolicies, EachPolicyKeepsLessThanTheOneBefore) {
  model::ModelConfig config = test::tiny_config(false);
  config.num_layers = 6;
  config.layer_window.assign(6, 0);
  for (int64_t chunk : {0, 64}) {
    size_t bytes[kPolicyCount];
    for (int i = 0; i < kPolicyCount; ++i) {
      const Recompute p = kPolicies[i];
      bytes[i] = chunk == 0 ? model::Decoder::arena_bytes(config, DType::F32, 2, 256, {}, p)
                            : model::ChunkedDecoder::arena_bytes(config, DType::F32, 2, 256,
                                                                 {.chunk_size = chunk, .recompute = p});
    }
    // bytes[0] none, [1] full, [2] selective, [3] elementwise, [4] norms
    EXPECT_LT(bytes[1], bytes[2]) << "full keeps less than selective, chunk " << chunk;
    EXPECT_LT(bytes[2], bytes[3]) << "selective keeps less than elementwise, chunk " << chunk;
    EXPECT_LT(bytes[3], bytes[4]) << "elementwise keeps less than norms, chunk " << chunk;
    EXPECT_LT(bytes[4], bytes[0]) << "norms keeps less than none, chunk " << chunk;
  }
}

// The buffers of a plan by name (bytes, alignment included).
std::map<std::string, size_t> by_name(const std::vector<model::PlannedBuffer>& buffers) {
  std::map<std::string, size_t> m;
  for (const model::PlannedBuffer& b : buffers) EXPECT_TRUE(m.emplace(b.name, b.bytes).second) << b.name;
  return m;
}

// Names (with bytes) in `a` that `b` lacks.
std::map<std::string, size_t> minus(const std::map<std::string, size_t>& a,
                                    const std::map<std::string, size_t>& b) {
  std::map<std::string, size_t> d;
  for (const auto& [name, bytes] : a)
    if (!b.count(name)) d.emplace(name, bytes);
  return d;
}

size_t aligned(size_t bytes) {
  return (bytes + model::kArenaAlignment - 1) / model::kArenaAlignment * model::kArenaAlignment;
}

// Elementwise keeps what None keeps less the two norm outputs, their rstds and h, of every layer: the
// whole-sequence decoder recomputes them into backward scratch (h in grad.gate, the norm outputs in grad.h
// when F >= D, else in a buffer of their own) and one shared rstd buffer; the chunked one into the one-chunk
// buffers it has under every policy. With LoRA (its t kept) the difference is the same.
TEST(RecomputePolicies, ElementwiseDropsExactlyTheNormOutputsAndH) {
  // F = 12: the norm outputs fit grad.h; F = 48 >= 2 * H * HD: dAttn and dQ fit h's buffer too; F = 6 < D:
  // neither.
  std::vector<model::ModelConfig> configs(3, test::tiny_config(false));
  configs[1].intermediate_size = 48;
  configs[2].intermediate_size = 6;
  for (const model::ModelConfig& config : configs)
    for (DType dt : {DType::F32, DType::F64})
      for (bool lora : {false, true}) {
        const int64_t B = 2, T = 40, N = B * T, L = config.num_layers, D = config.hidden_size,
                      F = config.intermediate_size, QD = config.num_heads * config.head_dim;
        const std::vector<model::LoraSpec> specs =
            lora ? test::tiny_lora_specs(config) : std::vector<model::LoraSpec>{};
        const size_t e = dtype_size(dt), st = dtype_size(model::stats_dtype(dt));
        // (name, bytes) of one layer's dropped buffers at `rows` tokens.
        auto dropped = [&](int64_t rows) {
          return std::map<std::string, size_t>{{"attn_rstd", aligned(size_t(rows) * st)},
                                               {"attn_in", aligned(size_t(rows * D) * e)},
                                               {"ffn_rstd", aligned(size_t(rows) * st)},
                                               {"ffn_in", aligned(size_t(rows * D) * e)},
                                               {"h", aligned(size_t(rows * F) * e)}};
        };
        size_t layer_bytes = 0;
        for (const auto& [name, bytes] : dropped(B * T)) layer_bytes += bytes;
        const std::string what = fmt::format("{} lora={} F={}", dtype_name(dt), lora, F);

        // Whole sequence: layer.l.X of every layer out and grad.gate/up (the gradients overwrite gate and
        // up), grad.attn_out/q too when they fit h's buffer; in: h's buffer, one rstd buffer, and the norm
        // output when it does not fit grad.h (F < D).
        const auto none = by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, Recompute::None));
        const auto elem =
            by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, Recompute::Elementwise));
        std::map<std::string, size_t> expect_out{{"grad.gate", aligned(size_t(N * F) * e)},
                                                 {"grad.up", aligned(size_t(N * F) * e)}},
            expect_in{{"recompute.h", aligned(size_t(N * F) * e)},
                      {"recompute.norm_rstd", aligned(size_t(N) * st)}};
        if (2 * QD <= F) {
          expect_out.emplace("grad.attn_out", aligned(size_t(N * QD) * e));
          expect_out.emplace("grad.q", aligned(size_t(N * QD) * e));
        }
        if (F < D) expect_in.emplace("recompute.norm_out", aligned(size_t(N * D) * e));
        for (const auto& [name, bytes] : dropped(B * T))
          for (int64_t l = 0; l < L; ++l) expect_out.emplace(fmt::format("layer.{}.{}", l, name), bytes);
        EXPECT_EQ(minus(none, elem), expect_out) << what;
        EXPECT_EQ(minus(elem, none), expect_in) << what;
        size_t out_bytes = 0, in_bytes = 0;
        for (const auto& [name, bytes] : expect_out) out_bytes += bytes;
        for (const auto& [name, bytes] : expect_in) in_bytes += bytes;
        EXPECT_EQ(out_bytes, size_t(L) * layer_bytes + 2 * aligned(size_t(N * F) * e) +
                                 (2 * QD <= F ? 2 * aligned(size_t(N * QD) * e) : 0))
            << what;
        EXPECT_EQ(model::Decoder::arena_bytes(config, dt, B, T, specs, Recompute::None) -
                      model::Decoder::arena_bytes(config, dt, B, T, specs, Recompute::Elementwise),
                  out_bytes - in_bytes)
            << what;

        // Chunked: the per-layer kept copies (all T tokens) and the one-chunk gate/up gradients out, nothing
        // in.
        const model::ChunkedOptions none_c{.chunk_size = 16, .recompute = Recompute::None};
        const model::ChunkedOptions elem_c{.chunk_size = 16, .recompute = Recompute::Elementwise};
        const model::ChunkedOptions sel_c{.chunk_size = 16, .recompute = Recompute::Selective};
        const auto none_k = by_name(model::ChunkedDecoder::planned_buffers(config, dt, B, T, none_c, specs));
        const auto elem_k = by_name(model::ChunkedDecoder::planned_buffers(config, dt, B, T, elem_c, specs));
        const auto sel_k = by_name(model::ChunkedDecoder::planned_buffers(config, dt, B, T, sel_c, specs));
        const int64_t chunk_rows = B * 16;
        expect_out = {{"chunk.grad.gate", aligned(size_t(chunk_rows * F) * e)},
                      {"chunk.grad.up", aligned(size_t(chunk_rows * F) * e)}};
        for (const auto& [name, bytes] : dropped(B * T))
          for (int64_t l = 0; l < L; ++l) expect_out.emplace(fmt::format("layer.{}.kept_{}", l, name), bytes);
        EXPECT_EQ(minus(none_k, elem_k), expect_out) << what << " chunked";
        EXPECT_TRUE(minus(elem_k, none_k).empty()) << what << " chunked";
        // Over Selective, Elementwise keeps gate and up of every layer and token (and takes no gate/up
        // gradient buffers).
        std::map<std::string, size_t> gate_up;
        for (int64_t l = 0; l < L; ++l)
          for (const char* name : {"gate", "up"})
            gate_up.emplace(fmt::format("layer.{}.kept_{}", l, name), aligned(size_t(B * T * F) * e));
        EXPECT_EQ(minus(elem_k, sel_k), gate_up) << what << " chunked";
        EXPECT_EQ(minus(sel_k, elem_k),
                  (std::map<std::string, size_t>{{"chunk.grad.gate", expect_out["chunk.grad.gate"]},
                                                 {"chunk.grad.up", expect_out["chunk.grad.up"]}}))
            << what << " chunked";
      }
}

// Norms keeps exactly Elementwise's buffers plus every layer's h: whole-sequence, the per-layer
// layer.l.h in and Elementwise's recomputed recompute.h out (dAttn/dQ move into each layer's h when they
// fit, else both policies have grad.attn_out/grad.q); offloading q and h, two h device slots in and the
// host holding every layer's h more. Chunked: the per-layer kept h in, the one-chunk h out.
TEST(RecomputePolicies, NormsKeepsElementwisesBuffersPlusH) {
  std::vector<model::ModelConfig> configs(3, test::tiny_config(false));
  configs[1].intermediate_size = 48;
  configs[2].intermediate_size = 6;
  for (const model::ModelConfig& config : configs)
    for (DType dt : {DType::F32, DType::F64})
      for (bool lora : {false, true}) {
        const int64_t B = 2, T = 40, N = B * T, L = config.num_layers, F = config.intermediate_size;
        const std::vector<model::LoraSpec> specs =
            lora ? test::tiny_lora_specs(config) : std::vector<model::LoraSpec>{};
        const size_t h_bytes = aligned(size_t(N * F) * dtype_size(dt));
        const std::string what = fmt::format("{} lora={} F={}", dtype_name(dt), lora, F);

        const auto elem =
            by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, Recompute::Elementwise));
        const auto norms =
            by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, Recompute::Norms));
        std::map<std::string, size_t> expect_in;
        for (int64_t l = 0; l < L; ++l) expect_in.emplace(fmt::format("layer.{}.h", l), h_bytes);
        EXPECT_EQ(minus(norms, elem), expect_in) << what;
        EXPECT_EQ(minus(elem, norms), (std::map<std::string, size_t>{{"recompute.h", h_bytes}})) << what;
        EXPECT_EQ(model::Decoder::arena_bytes(config, dt, B, T, specs, Recompute::Norms) -
                      model::Decoder::arena_bytes(config, dt, B, T, specs, Recompute::Elementwise),
                  size_t(L - 1) * h_bytes)
            << what;

        model::DecoderOptions elem_qh(Recompute::Elementwise), norms_qh(Recompute::Norms);
        elem_qh.offload_only = norms_qh.offload_only = {"q", "h"};
        const auto elem_off =
            by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, elem_qh, true));
        const auto norms_off =
            by_name(model::Decoder::planned_buffers(config, dt, B, T, specs, norms_qh, true));
        EXPECT_EQ(minus(norms_off, elem_off),
                  (std::map<std::string, size_t>{{"offload.slot0.h", h_bytes}, {"offload.slot1.h", h_bytes}}))
            << what << " offload q,h";
        EXPECT_EQ(minus(elem_off, norms_off), (std::map<std::string, size_t>{{"recompute.h", h_bytes}}))
            << what << " offload q,h";
        EXPECT_EQ(model::Decoder::offload_bytes(config, dt, B, T, specs, norms_qh) -
                      model::Decoder::offload_bytes(config, dt, B, T, specs, elem_qh),
                  size_t(L) * h_bytes)
            << what << " offload q,h";

        const model::ChunkedOptions elem_c{.chunk_size = 16, .recompute = Recompute::Elementwise};
        const model::ChunkedOptions norms_c{.chunk_size = 16, .recompute = Recompute::Norms};
        const auto elem_k = by_name(model::ChunkedDecoder::planned_buffers(config, dt, B, T, elem_c, specs));
        const auto norms_k =
            by_name(model::ChunkedDecoder::planned_buffers(config, dt, B, T, norms_c, specs));
        std::map<std::string, size_t> kept_h;
        for (int64_t l = 0; l < L; ++l) kept_h.emplace(fmt::format("layer.{}.kept_h", l), h_bytes);
        EXPECT_EQ(minus(norms_k, elem_k), kept_h) << what << " chunked";
        EXPECT_EQ(minus(elem_k, norms_k),
                  (std::map<std::string, size_t>{{"chunk.h", aligned(size_t(B * 16 * F) * dtype_size(dt))}}))
            << what << " chunked";
      }
}

TEST(RecomputePolicies, OffloadKeepsTwoLayersOnTheDevice) {
  model::ModelConfig config = test::tiny_config(false);
  config.num_layers = 6;
  config.layer_window.assign(6, 0);
  for (Recompute p : {Recompute::None, Recompute::Selective, Recompute::Elementwise, Recompute::Norms}) {
    const size_t kept = model::Decoder::arena_bytes(config, DType::F32, 2, 256, {}, p);
    const size_t device = model::Decoder::arena_bytes(config, DType::F32, 2, 256, {}, p, true);
    const size_t host = model::Decoder::offload_bytes(config, DType::F32, 2, 256, {}, p);
    EXPECT_LT(device, kept) << model::recompute_name(p);
    // What left the device is in host memory: 6 layers' kept tensors there, 2 layers' slots here.
    EXPECT_NEAR(double(kept - device), double(host) * 4.0 / 6.0, 4096.0 * 6) << model::recompute_name(p);
  }
  EXPECT_EQ(model::Decoder::offload_bytes(config, DType::F32, 2, 256, {}, Recompute::Full),
            model::kArenaAlignment)
      << "full recompute keeps nothing per layer to offload";
}

// offload_only {q}: the host holds every layer's q and nothing else; the device keeps the rest as without
// offload, with two q slots instead of six layers' q.
TEST(RecomputePolicies, OffloadOnlyMovesJustThoseActivations) {
  model::ModelConfig config = test::tiny_config(false);
  config.num_layers = 6;
  config.layer_window.assign(6, 0);
  constexpr int64_t B = 2, T = 256;
  const int64_t q_bytes = B * T * config.num_heads * config.head_dim * 4;  // f32
  model::DecoderOptions only_q(Recompute::Elementwise);
  only_q.offload_only = {"q"};
  const size_t kept = model::Decoder::arena_bytes(config, DType::F32, B, T, {}, Recompute::Elementwise);
  const size_t device = model::Decoder::arena_bytes(config, DType::F32, B, T, {}, only_q, true);
  const size_t host = model::Decoder::offload_bytes(config, DType::F32, B, T, {}, only_q);
  EXPECT_EQ(kept - device, size_t(4 * q_bytes));
  EXPECT_EQ(host, size_t(6 * q_bytes) + model::kArenaAlignment);  // the host arena's own slack
  only_q.offload_only = {"no_such_tensor"};
  test::expect_error_mentions(
      [&] { model::check_offload_names(only_q.offload_only, "config: 'offload_only'"); },
      {"config: 'offload_only': 'no_such_tensor' is not a kept activation", "attn_out"});
}

// Five layers, so that offloaded layers are copied back (the last two stay in their slots): every policy,
// offloaded or not, gives the same bits.
TEST(RecomputePolicies, OffloadedLayersComeBackBitIdentical) {
  for (int64_t F : {12, 48, 6}) {  // see WholeSequenceGradientsAreBitIdentical
    constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;
    model::ModelConfig c = test::tiny_config(false);
    c.num_layers = 5;
    c.layer_window = {0, 3, 0, 2, 0};
    c.intermediate_size = F;
    test::TinyBatch data;
    const model::Batch batch = data.batch(true);
    const int64_t label_tokens = model::count_label_tokens(batch);
    Arena params("params", HostMemory::instance(), 2 * model::weights_bytes(c, DType::F64));
    model::ModelWeights w = model::allocate_weights(c, DType::F64, params);
    test::fill_random(c, w, 83);
    std::vector<std::vector<char>> reference;
    for (int variant = 0; variant < 2 * kPolicyCount; ++variant) {
      const Recompute p = kPolicies[variant % kPolicyCount];
      const bool offload = variant >= kPolicyCount;
      Arena grads_arena("grads", HostMemory::instance(), model::grads_bytes(c, DType::F64));
      model::ModelWeights g = model::allocate_grads(ctx, c, DType::F64, grads_arena);
      Arena arena("acts", HostMemory::instance(),
                  model::Decoder::arena_bytes(c, DType::F64, B, T, {}, p, offload));
      Arena host("offload", HostMemory::instance(),
                 model::Decoder::offload_bytes(c, DType::F64, B, T, {}, p));
      model::Decoder d(ctx, c, DType::F64, B, T, arena, {}, p, offload ? &host : nullptr);
      d.forward(w, batch, label_tokens);
      d.backward(w, g);
      std::vector<std::vector<char>> got;
      for (const model::WeightSpec& s : model::weight_specs(c))
        got.push_back(bytes_of(model::weight_of(g, s)));
      if (reference.empty()) reference = got;
      EXPECT_EQ(got, reference) << model::recompute_name(p) << (offload ? "+offload" : "") << " F " << F;
    }
  }
}

TEST(RecomputePolicies, NamesRoundTrip) {
  for (Recompute p : kPolicies) EXPECT_EQ(model::recompute_from_name(model::recompute_name(p)), p);
  EXPECT_FALSE(model::recompute_from_name("partial").has_value());
  EXPECT_EQ(model::recompute_from_name("elementwise"), Recompute::Elementwise);
  EXPECT_EQ(model::recompute_from_name("norms"), Recompute::Norms);
  EXPECT_EQ(model::recompute_name(Recompute::Norms), "norms");
}

}  // namespace
}  // namespace lt
