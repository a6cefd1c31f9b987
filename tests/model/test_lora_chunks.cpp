// A layer with LoRA adapters on every projection and dropout, run over a row in two chunks (K/V context and
// dK/dV accumulators between them), gives the whole-sequence output, input gradient and adapter gradients:
// what chunked LoRA training needs. The dropout masks follow token positions, so they agree too.
#include <gtest/gtest.h>

#include "lora_test_util.h"
#include "support/test_context.h"
#include "support/test_support.h"

namespace lt {
namespace {

constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;

struct ChunkBuffers {
  model::LayerActivations acts;
  model::LayerScratch scratch;
};

ChunkBuffers chunk_buffers(Arena& arena, const model::ModelConfig& c, const model::LayerLora& lora, int64_t C,
                           const model::KvContext* kv, const model::KvGrads* kv_grads) {
  const int64_t N = B * C, D = c.hidden_size, F = c.intermediate_size, H = c.num_heads, KVH = c.num_kv_heads,
                HD = c.head_dim;
  const DType dt = DType::F64;
  ChunkBuffers b;
  model::LayerActivations& a = b.acts;
  a.x = arena.alloc("x", dt, {N, D});
  a.attn_rstd = arena.alloc("attn_rstd", dt, {N});
  a.attn_in = arena.alloc("attn_in", dt, {N, D});
  a.q = arena.alloc("q", dt, {B, C, H, HD});
  a.k = kv ? kv->k : arena.alloc("k", dt, {B, C, KVH, HD});
  a.v = kv ? kv->v : arena.alloc("v", dt, {B, C, KVH, HD});
  a.attn_out = arena.alloc("attn_out", dt, {B, C, H, HD});
  a.attn_lse = arena.alloc("attn_lse", dt, {B, H, C});
  a.mid = arena.alloc("mid", dt, {N, D});
  a.ffn_rstd = arena.alloc("ffn_rstd", dt, {N});
  a.ffn_in = arena.alloc("ffn_in", dt, {N, D});
  a.gate = arena.alloc("gate", dt, {N, F});
  a.up = arena.alloc("up", dt, {N, F});
  a.h = arena.alloc("h", dt, {N, F});
  for (int m = 0; m < model::kLoraModuleCount; ++m)
    if (lora.adapters[size_t(m)].present())
      a.lora_t[model::LoraModule(m)] = arena.alloc("lora_t", dt, {N, lora.adapters[size_t(m)].rank});
  model::LayerScratch& s = b.scratch;
  s.d_norm = arena.alloc("d_norm", dt, {N, D});
  s.d_h = arena.alloc("d_h", dt, {N, F});
  s.d_gate = arena.alloc("d_gate", dt, {N, F});
  s.d_up = arena.alloc("d_up", dt, {N, F});
  s.d_attn = arena.alloc("d_attn", dt, {B, C, H, HD});
  s.d_q = arena.alloc("d_q", dt, {B, C, H, HD});
  s.d_k = kv_grads ? kv_grads->dk : arena.alloc("d_k", dt, {B, C, KVH, HD});
  s.d_v = kv_grads ? kv_grads->dv : arena.alloc("d_v", dt, {B, C, KVH, HD});
  return b;
}

template <class V>
std::vector<V> take(const std::vector<V>& full, int64_t W, int64_t off, int64_t C) {
  std::vector<V> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), full.begin() + (b * T + off) * W, full.begin() + (b * T + off + C) * W);
  return out;
}
void put(std::vector<double>& full, const double* chunk, int64_t W, int64_t off, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    std::copy(chunk + b * C * W, chunk + (b + 1) * C * W, full.begin() + (b * T + off) * W);
}
using test::values;
model::KvContext kv_context(Arena& arena, const model::ModelConfig& c, Tensor segments) {
  return {arena.alloc("k", DType::F64, {B, T, c.num_kv_heads, c.head_dim}),
          arena.alloc("v", DType::F64, {B, T, c.num_kv_heads, c.head_dim}), segments};
}
model::KvGrads kv_grads(Arena& arena, const model::ModelConfig& c) {
  model::KvGrads g{arena.alloc("dk", DType::F64, {B, T, c.num_kv_heads, c.head_dim}),
                   arena.alloc("dv", DType::F64, {B, T, c.num_kv_heads, c.head_dim})};
  std::fill_n(g.dk.ptr<double>(), g.dk.numel(), 0.0);
  std::fill_n(g.dv.ptr<double>(), g.dv.numel(), 0.0);
  return g;
}

TEST(LoraChunks, TwoChunksWithDropoutEqualTheWholeSequence) {
  test::TinyLoraModel m(DType::F64, false, 61);
  const model::ModelConfig& config = m.config;
  const int64_t layer = 1, D = config.hidden_size;
  test::TinyBatch data;
  Arena arena("lora-chunks", HostMemory::instance(), size_t(8) << 20);
  model::LoraWeights g_chunks = model::allocate_lora(config, m.specs, DType::F64, arena);
  model::zero_lora(ctx, g_chunks);
  const model::LayerWeights& lw = m.weights.layers[layer];
  model::LayerWeights frozen;  // no base gradients
  const model::LayerLora& lora = m.lora.layers[layer];
  std::vector<double> x = test::random_values(size_t(B * T * D), 1);
  std::vector<double> d_out = test::random_values(size_t(B * T * D), 2);
  Tensor segments(data.segments.data(), DType::I32, {B, T});
  int64_t max_in = 0, max_r = 0;
  for (const model::LoraSpec& s : m.specs) max_in = std::max(max_in, s.in), max_r = std::max(max_r, s.rank);
  auto pass = [&](model::LayerLora* grads) {
    model::LoraPass p;
    p.weights = &lora;
    p.grads = grads;
    p.dropout = {.p = 0.3, .seed = 5, .step = 4, .micro_batch = 1};
    p.scratch_in = arena.alloc("scratch_in", DType::F64, {B * T, max_in});
    p.scratch_r = arena.alloc("scratch_r", DType::F64, {B * T, max_r});
    return p;
  };

  // Whole sequence.
  model::KvContext kv = kv_context(arena, config, segments);
  model::KvGrads kvg = kv_grads(arena, config);
  ChunkBuffers whole = chunk_buffers(arena, config, lora, T, &kv, &kvg);
  std::copy(x.begin(), x.end(), whole.acts.x.ptr<double>());
  Tensor out_whole = arena.alloc("out", DType::F64, {B * T, D});
  const model::ChunkInfo all{.batch = B,
                             .tokens = T,
                             .q_offset = 0,
                             .positions = Tensor(data.positions.data(), DType::I32, {B, T}),
                             .q_segments = segments};
  const model::LoraPass whole_pass = pass(&m.lora_grads.layers[layer]);
  model::layer_forward(ctx, config, layer, lw, all, kv, whole.acts, out_whole, whole_pass);
  Tensor d_whole = arena.alloc("d_whole", DType::F64, {B * T, D});
  std::copy(d_out.begin(), d_out.end(), d_whole.ptr<double>());
  model::layer_backward(ctx, config, layer, lw, frozen, all, kv, kvg, whole.acts, whole.scratch, d_whole,
                        whole_pass);

  // Chunks of 4 and 3 tokens.
  model::KvContext kv2 = kv_context(arena, config, segments);
  model::KvGrads kvg2 = kv_grads(arena, config);
  const int64_t offsets[2] = {0, 4}, sizes[2] = {4, 3};
  std::vector<std::vector<int32_t>> positions(2), segs(2);
  std::vector<ChunkBuffers> bufs;
  std::vector<model::ChunkInfo> chunks;
  std::vector<double> out_chunks(size_t(B * T * D)), d_in_chunks(size_t(B * T * D));
  const model::LoraPass chunk_pass = pass(&g_chunks.layers[layer]);
  for (int c = 0; c < 2; ++c) {
    const int64_t C = sizes[c];
    positions[c] = take(data.positions, 1, offsets[c], C);
    segs[c] = take(data.segments, 1, offsets[c], C);
    bufs.push_back(chunk_buffers(arena, config, lora, C, nullptr, nullptr));
    chunks.push_back({.batch = B,
                      .tokens = C,
                      .q_offset = offsets[c],
                      .positions = Tensor(positions[c].data(), DType::I32, {B, C}),
                      .q_segments = Tensor(segs[c].data(), DType::I32, {B, C})});
    std::vector<double> xc = take(x, D, offsets[c], C);
    std::copy(xc.begin(), xc.end(), bufs[c].acts.x.ptr<double>());
    Tensor out = arena.alloc("out_c", DType::F64, {B * C, D});
    model::layer_forward(ctx, config, layer, lw, chunks[c], kv2, bufs[c].acts, out, chunk_pass);
    put(out_chunks, out.ptr<double>(), D, offsets[c], C);
  }
  for (int c = 1; c >= 0; --c) {
    const int64_t C = sizes[c];
    std::vector<double> dc = take(d_out, D, offsets[c], C);
    Tensor d = arena.alloc("d_c", DType::F64, {B * C, D});
    std::copy(dc.begin(), dc.end(), d.ptr<double>());
    model::layer_backward(ctx, config, layer, lw, frozen, chunks[c], kv2, kvg2, bufs[c].acts, bufs[c].scratch,
                          d, chunk_pass);
    put(d_in_chunks, d.ptr<double>(), D, offsets[c], C);
  }

  EXPECT_LE(test::max_rel_diff(out_chunks, values(out_whole)), 1e-13);
  EXPECT_LE(test::max_rel_diff(d_in_chunks, values(d_whole)), 1e-12);
  int compared = 0;
  for (const model::LoraSpec& s : m.specs) {
    if (s.layer != layer) continue;
    for (model::LoraMatrix which : {model::LoraMatrix::A, model::LoraMatrix::B}) {
      const std::vector<double> want = values(m.lora_grads.matrix(s, which));
      double top = 0;
      for (double v : want) top = std::max(top, std::abs(v));
      EXPECT_GT(top, 0) << model::lora_tensor_name(s, which);
      EXPECT_LE(test::max_rel_diff(values(g_chunks.matrix(s, which)), want), 1e-12)
          << model::lora_tensor_name(s, which);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2 * model::kLoraModuleCount);
}

}  // namespace
}  // namespace lt
