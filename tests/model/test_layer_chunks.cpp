// A layer run over a row in two chunks (with the K/V context and dK/dV accumulators between them) gives
// the whole-sequence output, input gradient and parameter gradients: the contract chunked training needs.
#include <gtest/gtest.h>

#include "core/arena.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "tiny_model.h"

namespace lt {
namespace {

constexpr int64_t B = test::TinyBatch::B, T = test::TinyBatch::T;

struct LayerBuffers {
  model::LayerActivations acts;
  model::LayerScratch scratch;
};

// Buffers of a chunk of C tokens. With `kv`/`kv_grads` given, K/V (and dK/dV) alias them (whole sequence).
LayerBuffers chunk_buffers(Arena& arena, const model::ModelConfig& c, int64_t C, const model::KvContext* kv,
                           const model::KvGrads* kv_grads) {
  const int64_t N = B * C, D = c.hidden_size, F = c.intermediate_size, H = c.num_heads, KVH = c.num_kv_heads,
                HD = c.head_dim;
  const DType dt = DType::F64;
  LayerBuffers b;
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

// Rows [off, off + C) of every row of a (B, T, W) array, as (B, C, W); and back.
template <class T_>
std::vector<T_> take(const std::vector<T_>& full, int64_t W, int64_t off, int64_t C) {
  std::vector<T_> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), full.begin() + (b * T + off) * W, full.begin() + (b * T + off + C) * W);
  return out;
}
void put(std::vector<double>& full, const double* chunk, int64_t W, int64_t off, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    std::copy(chunk + b * C * W, chunk + (b + 1) * C * W, full.begin() + (b * T + off) * W);
}

using test::values;

TEST(LayerChunks, TwoChunksEqualTheWholeSequence) {
  const model::ModelConfig config = test::tiny_config(false);
  const int64_t layer = 1;  // the one with a sliding window
  ASSERT_GT(config.window_for_layer(layer), 0);
  const int64_t D = config.hidden_size, KVH = config.num_kv_heads, HD = config.head_dim;
  test::TinyBatch data;
  Arena arena("chunks", HostMemory::instance(), size_t(8) << 20);
  model::ModelWeights w = model::allocate_weights(config, DType::F64, arena);
  test::fill_random(config, w, 41);
  model::ModelWeights g_whole = model::allocate_grads(ctx, config, DType::F64, arena);
  model::ModelWeights g_chunks = model::allocate_grads(ctx, config, DType::F64, arena);
  const model::LayerWeights& lw = w.layers[layer];
  std::vector<double> x = test::random_values(size_t(B * T * D), 1);
  std::vector<double> d_out = test::random_values(size_t(B * T * D), 2);
  Tensor segments(data.segments.data(), DType::I32, {B, T});

  // Whole sequence: one chunk, K/V written in place.
  model::KvContext kv{arena.alloc("k", DType::F64, {B, T, KVH, HD}),
                      arena.alloc("v", DType::F64, {B, T, KVH, HD}), segments};
  model::KvGrads kv_grads{arena.alloc("dk", DType::F64, {B, T, KVH, HD}),
                          arena.alloc("dv", DType::F64, {B, T, KVH, HD})};
  std::fill_n(kv_grads.dk.ptr<double>(), kv_grads.dk.numel(), 0.0);
  std::fill_n(kv_grads.dv.ptr<double>(), kv_grads.dv.numel(), 0.0);
  LayerBuffers whole = chunk_buffers(arena, config, T, &kv, &kv_grads);
  std::copy(x.begin(), x.end(), whole.acts.x.ptr<double>());
  Tensor out_whole = arena.alloc("out", DType::F64, {B * T, D});
  const model::ChunkInfo all{.batch = B,
                             .tokens = T,
                             .q_offset = 0,
                             .positions = Tensor(data.positions.data(), DType::I32, {B, T}),
                             .q_segments = segments};
  model::layer_forward(ctx, config, layer, lw, all, kv, whole.acts, out_whole);
  Tensor d_whole = arena.alloc("d_whole", DType::F64, {B * T, D});
  std::copy(d_out.begin(), d_out.end(), d_whole.ptr<double>());
  model::layer_backward(ctx, config, layer, lw, g_whole.layers[layer], all, kv, kv_grads, whole.acts,
                        whole.scratch, d_whole);

  // Two chunks of 4 and 3 tokens over a separate K/V context.
  model::KvContext kv2{arena.alloc("k2", DType::F64, {B, T, KVH, HD}),
                       arena.alloc("v2", DType::F64, {B, T, KVH, HD}), segments};
  model::KvGrads kv_grads2{arena.alloc("dk2", DType::F64, {B, T, KVH, HD}),
                           arena.alloc("dv2", DType::F64, {B, T, KVH, HD})};
  std::fill_n(kv_grads2.dk.ptr<double>(), kv_grads2.dk.numel(), 0.0);
  std::fill_n(kv_grads2.dv.ptr<double>(), kv_grads2.dv.numel(), 0.0);
  const int64_t offsets[2] = {0, 4}, sizes[2] = {4, 3};
  std::vector<std::vector<int32_t>> positions(2), segs(2);
  std::vector<LayerBuffers> bufs;
  std::vector<model::ChunkInfo> chunks;
  std::vector<double> out_chunks(size_t(B * T * D)), d_in_chunks(size_t(B * T * D));
  for (int c = 0; c < 2; ++c) {
    const int64_t C = sizes[c];
    positions[c] = take(data.positions, 1, offsets[c], C);
    segs[c] = take(data.segments, 1, offsets[c], C);
    bufs.push_back(chunk_buffers(arena, config, C, nullptr, nullptr));
    chunks.push_back({.batch = B,
                      .tokens = C,
                      .q_offset = offsets[c],
                      .positions = Tensor(positions[c].data(), DType::I32, {B, C}),
                      .q_segments = Tensor(segs[c].data(), DType::I32, {B, C})});
    std::vector<double> xc = take(x, D, offsets[c], C);
    std::copy(xc.begin(), xc.end(), bufs[c].acts.x.ptr<double>());
    Tensor out = arena.alloc("out_c", DType::F64, {B * C, D});
    model::layer_forward(ctx, config, layer, lw, chunks[c], kv2, bufs[c].acts, out);
    put(out_chunks, out.ptr<double>(), D, offsets[c], C);
  }
  for (int c = 1; c >= 0; --c) {  // backward in reverse chunk order
    const int64_t C = sizes[c];
    std::vector<double> dc = take(d_out, D, offsets[c], C);
    Tensor d = arena.alloc("d_c", DType::F64, {B * C, D});
    std::copy(dc.begin(), dc.end(), d.ptr<double>());
    model::layer_backward(ctx, config, layer, lw, g_chunks.layers[layer], chunks[c], kv2, kv_grads2,
                          bufs[c].acts, bufs[c].scratch, d);
    put(d_in_chunks, d.ptr<double>(), D, offsets[c], C);
  }

  EXPECT_LE(test::max_rel_diff(out_chunks, values(out_whole)), 1e-13);
  EXPECT_LE(test::max_rel_diff(values(kv2.k), values(kv.k)), 1e-13);
  EXPECT_LE(test::max_rel_diff(d_in_chunks, values(d_whole)), 1e-12);
  for (const model::WeightSpec& s : model::weight_specs(config)) {
    if (s.layer != layer) continue;
    EXPECT_LE(test::max_rel_diff(values(model::weight_of(g_chunks, s)), values(model::weight_of(g_whole, s))),
              1e-12)
        << s.hf_name;
  }
}

}  // namespace
}  // namespace lt
