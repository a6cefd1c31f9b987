// The decoding loop (generate.h): sampling each row's next token and feeding them back to the KV cache.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "model/generate.h"
#include "model/sampling.h"
#include "ops/device.h"

namespace lt::model {

namespace {

constexpr uint64_t kSamplingStream = 0x6E4E7A7Eull;

void check_options(const SamplingOptions& o) {
  LT_CHECK(o.max_new_tokens >= 0, "generate: max_new_tokens is {}, expected >= 0", o.max_new_tokens);
  LT_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: top_p is {}, expected a value in (0, 1]", o.top_p);
}

bool is_stop(const SamplingOptions& o, int32_t id) {
  return std::find(o.stop_ids.begin(), o.stop_ids.end(), int64_t(id)) != o.stop_ids.end();
}

}  // namespace

int32_t sample_token(std::span<const double> logits, const SamplingOptions& o, uint64_t draw) {
  LT_CHECK(!logits.empty(), "generate: no logits");
  if (o.temperature <= 0) return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<double> kept(logits.begin(), logits.end());  // (V) after top_k
  apply_top_k(kept, o.top_k);
  logits = kept;
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - top) / o.temperature);
  std::vector<int32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // Nucleus: keep the most likely tokens until their mass reaches top_p (at least one).
  size_t keep = 0;
  double mass = 0;
  while (keep < order.size() && (keep == 0 || mass < o.top_p * total)) mass += p[size_t(order[keep++])];
  const double u = philox_uniform_double(o.seed, kSamplingStream, draw) * mass;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[size_t(order[i])];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

std::vector<int32_t> generate(const ops::Context& ctx, const ModelConfig& config, DType dtype,
                              const ModelWeights& weights, std::span<const int32_t> prompt,
                              const SamplingOptions& options) {
  LT_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  std::function<bool(size_t, int32_t)> each;
  if (options.on_token) each = [&](size_t, int32_t id) { return options.on_token(id); };
  return generate_rows(ctx, config, dtype, weights, {std::vector<int32_t>(prompt.begin(), prompt.end())},
                       options, each)[0];
}

std::vector<std::vector<int32_t>> generate_rows(const ops::Context& ctx, const ModelConfig& config,
                                                DType dtype, const ModelWeights& weights,
                                                const std::vector<std::vector<int32_t>>& prompts,
                                                const SamplingOptions& options,
                                                const std::function<bool(size_t, int32_t)>& on_token) {
  check_options(options);
  LT_CHECK(!prompts.empty(), "generate: no prompts");
  const int64_t B = int64_t(prompts.size());
  int64_t longest = 0;
  for (size_t r = 0; r < prompts.size(); ++r) {
    LT_CHECK(!prompts[r].empty(), "generate: prompt {} has no tokens", r);
    longest = std::max(longest, int64_t(prompts[r].size()));
  }
  std::vector<std::vector<int32_t>> out(prompts.size());
  if (options.max_new_tokens == 0) return out;
  const int64_t room = longest + options.max_new_tokens;
  // The largest chunk is the prompts': the activations need room for it only, the cache for every token.
  Arena arena("generate", ops::memory_resource(weights.embed.device),
              KvCacheDecoder::arena_bytes(config, dtype, room, B, longest));
  KvCacheDecoder decoder(ctx, config, dtype, weights, room, arena, B, longest);

  // The prompts left-padded to the longest (B, longest): the pad id is the row's first token, never seen.
  std::vector<int32_t> chunk(size_t(B * longest));
  std::vector<int64_t> pads(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r) {
    pads[r] = longest - int64_t(prompts[r].size());
    std::fill_n(chunk.begin() + int64_t(r) * longest, pads[r], prompts[r][0]);
    std::copy(prompts[r].begin(), prompts[r].end(), chunk.begin() + int64_t(r) * longest + pads[r]);
  }
  const int64_t V = config.vocab_size;
  std::vector<double> logits = decoder.feed_rows(chunk, pads);  // (B, V)
  std::vector<std::vector<int32_t>> history = prompts;          // what the repetition penalty sees
  std::vector<char> done(prompts.size(), 0);
  std::vector<int32_t> next(prompts.size());  // (B) the tokens fed back; a finished row repeats its last
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    for (size_t r = 0; r < prompts.size(); ++r) {
      if (done[r]) continue;
      std::span<double> row(logits.data() + int64_t(r) * V, size_t(V));
      std::vector<double> row_logits(row.begin(), row.end());
      apply_repetition_penalty(row_logits, history[r], options.repetition_penalty);
      next[r] = sample_token(row_logits, options, uint64_t(i));
      out[r].push_back(next[r]);
      history[r].push_back(next[r]);
      const bool go_on = !on_token || on_token(r, next[r]);
      if (!go_on || is_stop(options, next[r])) done[r] = 1;
    }
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
    if (i + 1 < options.max_new_tokens) logits = decoder.feed_rows(next);
  }
  return out;
}

}  // namespace lt::model
