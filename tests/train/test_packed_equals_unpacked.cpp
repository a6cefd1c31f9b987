// Packed == unpacked: a packed batch (several sequences per row, positions restarting, segment ids that
// stop attention at every boundary) gives the same loss and the same gradient of every parameter as the
// same sequences run one by one, with the step's label-token count as the common denominator. float64.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/philox.h"
#include "data/batch.h"
#include "model/decoder.h"
#include "support/test_context.h"
#include "support/test_support.h"
#include "train/model_batch.h"
#include "train/run_setup.h"

namespace lt::train {
namespace {

// Examples with a prompt part (labels -100) and lengths that make rows of different fill.
std::vector<data::Example> make_examples(const std::vector<int>& lengths, int64_t vocab) {
  std::vector<data::Example> out;
  uint64_t k = 0;
  for (int n : lengths) {
    data::Example e;
    for (int i = 0; i < n; ++i) {
      int32_t id = int32_t(3 + philox_bits(11, 0, k++) % uint32_t(vocab - 3));
      e.input_ids.push_back(id);
      e.labels.push_back(i < 2 ? data::kIgnoreIndex : id);
    }
    out.push_back(e);
  }
  return out;
}

void write_model(const std::string& dir, const std::string& arch, bool tied) {
  std::filesystem::create_directories(dir);
  nlohmann::json c{{"architectures", {arch + "ForCausalLM"}},
                   {"vocab_size", 29},
                   {"hidden_size", 16},
                   {"intermediate_size", 24},
                   {"num_hidden_layers", 2},
                   {"num_attention_heads", 4},
                   {"num_key_value_heads", 2},
                   {"max_position_embeddings", 64},
                   {"rms_norm_eps", 1e-5},
                   {"rope_theta", 10000.0},
                   {"initializer_range", 0.3},
                   {"tie_word_embeddings", tied}};
  if (arch == "Mistral") c["sliding_window"] = 3;  // shorter than the sequences: the window matters
  std::ofstream(dir + "/config.json") << c.dump(2);
}

struct Result {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // per weight_specs() entry
};

Result run(const LoadedModel& m, const std::vector<data::Example>& ex,
           const std::vector<std::vector<std::vector<int64_t>>>& batches, int64_t label_tokens) {
  Arena grad_arena("grads", HostMemory::instance(), model::grads_bytes(m.config, DType::F64));
  model::ModelWeights grads = model::allocate_grads(ctx, m.config, DType::F64, grad_arena);
  Result r;
  for (const auto& rows : batches) {
    ModelBatch b = to_model_batch(data::make_batch(ex, rows, 0));
    Arena arena("acts", HostMemory::instance(), model::Decoder::arena_bytes(m.config, DType::F64, b.B, b.T));
    model::Decoder d(ctx, m.config, DType::F64, b.B, b.T, arena);
    r.loss += d.forward(m.weights, b.view(), label_tokens);
    d.backward(m.weights, grads);
  }
  for (const model::WeightSpec& spec : model::weight_specs(m.config)) {
    const Tensor& g = model::weight_of(grads, spec);
    const double* p = g.ptr<double>(spec.hf_name);
    r.grads.emplace_back(p, p + g.numel());
  }
  return r;
}

void check_packed_equals_unpacked(const std::string& arch, bool tied) {
  test::TempDir dir;
  write_model(dir.file("model"), arch, tied);
  LoadedModel m = load_model(ctx, dir.file("model"), DType::F64, /*random_init=*/true, /*seed=*/5);
  auto ex = make_examples({7, 4, 9, 5, 3, 8}, m.config.vocab_size);

  std::vector<std::vector<int64_t>> rows = data::pack_rows({7, 4, 9, 5, 3, 8}, 14);
  ASSERT_LT(rows.size(), ex.size()) << "the plan must actually pack";
  data::Batch packed_batch = data::make_batch(ex, rows, 0);
  const int64_t label_tokens = packed_batch.label_tokens;

  int64_t alone_tokens = 0;
  std::vector<std::vector<std::vector<int64_t>>> one_by_one;
  for (int64_t i = 0; i < int64_t(ex.size()); ++i) {
    one_by_one.push_back({{i}});
    alone_tokens += data::make_batch(ex, {{i}}, 0).label_tokens;
  }
  ASSERT_EQ(alone_tokens, label_tokens) << "packing must not change which tokens are scored";

  Result packed = run(m, ex, {rows}, label_tokens);
  Result alone = run(m, ex, one_by_one, label_tokens);
  EXPECT_NEAR(packed.loss, alone.loss, 1e-12 * std::abs(alone.loss)) << arch;
  auto specs = model::weight_specs(m.config);
  for (size_t i = 0; i < specs.size(); ++i) {
    double err = test::max_rel_diff(packed.grads[i], alone.grads[i]);
    EXPECT_LE(err, 1e-12) << arch << " " << specs[i].hf_name;
    double norm = 0;
    for (double v : alone.grads[i]) norm = std::max(norm, std::abs(v));
    EXPECT_GT(norm, 0.0) << specs[i].hf_name << ": a zero gradient would make the check vacuous";
  }
}

TEST(PackedEqualsUnpacked, LlamaUntied) {
  check_packed_equals_unpacked("Llama", false);
}
TEST(PackedEqualsUnpacked, Qwen2TiedWithBiases) {
  check_packed_equals_unpacked("Qwen2", true);
}
TEST(PackedEqualsUnpacked, MistralSlidingWindow) {
  check_packed_equals_unpacked("Mistral", false);
}

}  // namespace
}  // namespace lt::train
