// Batched KV-cache decoding on the GPU: prompts of different lengths decoded together as the rows of one
// cache (left-padded, the padding its own segment) give each row the greedy tokens it gets decoded alone on
// the GPU, and logits equal to the CPU float64 decoder of that row alone within float32 rounding. This
// exercises the CUDA attention with a query offset, a whole-cache K/V range and segment ids in decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "model/generate.h"
#include "model/tiny_model.h"
#include "model/weights_transfer.h"
#include "ops/device.h"
#include "support/test_context.h"

namespace lt {
namespace {

const std::vector<std::vector<int32_t>> kPrompts{{3, 7, 1, 9, 4}, {2, 8}, {5, 0, 8, 6, 2, 9, 1}, {10}};

TEST(GenerateCuda, BatchedRowsEqualEachRowAloneAndTheCpu) {
  const model::ModelConfig c = test::tiny_config(/*tied=*/false);
  Arena host_arena("host", HostMemory::instance(), model::weights_bytes(c, DType::F64));
  model::ModelWeights host = model::allocate_weights(c, DType::F64, host_arena);
  test::fill_random(c, host, 11);
  Arena gpu_arena("gpu", ops::memory_resource(Device::CUDA), model::weights_bytes(c, DType::F32));
  model::ModelWeights gpu = model::allocate_weights(c, DType::F32, gpu_arena);
  model::copy_weights(ctx, c, gpu, host);

  const model::SamplingOptions greedy{.max_new_tokens = 8};
  const std::vector<std::vector<int32_t>> together =
      model::generate_rows(ctx, c, DType::F32, gpu, kPrompts, greedy);
  for (size_t r = 0; r < kPrompts.size(); ++r) {
    EXPECT_EQ(together[r], model::generate(ctx, c, DType::F32, gpu, kPrompts[r], greedy)) << "row " << r;
  }

  // The first step's logits of every row against the CPU float64 decoder of that row alone.
  const int64_t B = int64_t(kPrompts.size()), longest = 7, V = c.vocab_size;
  Arena rows_arena("rows", ops::memory_resource(Device::CUDA),
                   model::KvCacheDecoder::arena_bytes(c, DType::F32, longest + 1, B));
  model::KvCacheDecoder rows(ctx, c, DType::F32, gpu, longest + 1, rows_arena, B);
  std::vector<int32_t> chunk;
  std::vector<int64_t> pads;
  for (const std::vector<int32_t>& p : kPrompts) {
    pads.push_back(longest - int64_t(p.size()));
    chunk.insert(chunk.end(), size_t(pads.back()), 9);
    chunk.insert(chunk.end(), p.begin(), p.end());
  }
  const std::vector<double> logits = rows.feed_rows(chunk, pads);
  for (int64_t r = 0; r < B; ++r) {
    const std::vector<int32_t>& p = kPrompts[size_t(r)];
    Arena cpu_arena("cpu", HostMemory::instance(),
                    model::KvCacheDecoder::arena_bytes(c, DType::F64, int64_t(p.size())));
    model::KvCacheDecoder alone(ctx, c, DType::F64, host, int64_t(p.size()), cpu_arena);
    const std::vector<double> reference = alone.feed(p);
    double worst = 0;
    for (int64_t v = 0; v < V; ++v)
      worst = std::max(worst, std::abs(logits[size_t(r * V + v)] - reference[size_t(v)]));
    EXPECT_LE(worst, 1e-4) << "row " << r;  // float32 against float64 on O(1) logits
  }
}

}  // namespace
}  // namespace lt
