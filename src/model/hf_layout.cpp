#include "model/hf_layout.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "model/arch/architecture.h"

namespace lt::model {

namespace {

void permute_rows(const ModelConfig& c, Tensor t, bool to_hf) {
  if (!qkv_interleaved_per_head(c) || t.empty()) return;
  const int64_t H = c.num_heads, HD = c.head_dim;
  LT_CHECK(c.num_kv_heads == H, "{}: per-head interleaved query_key_value needs as many kv heads as heads",
           c.architecture_name);
  LT_CHECK(t.device == Device::CPU, "query_key_value rows {}: on {}, expected host memory", t.shape_string(),
           device_name(t.device));
  LT_CHECK(t.ndim >= 1 && t.shape[0] == 3 * H * HD, "query_key_value rows: shape {}, expected {} rows",
           t.shape_string(), 3 * H * HD);
  const size_t row = size_t(t.numel() / t.shape[0]) * dtype_size(t.dtype);  // bytes of one row
  std::vector<char> copy(size_t(t.bytes()));
  std::memcpy(copy.data(), t.data, copy.size());
  char* out = static_cast<char*>(t.data);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < HD; ++d) {
        const size_t engine = size_t((s * H + h) * HD + d), hf = size_t((h * 3 + s) * HD + d);
        const size_t dst = to_hf ? hf : engine, src = to_hf ? engine : hf;
        std::memcpy(out + dst * row, copy.data() + src * row, row);
      }
}

}  // namespace

bool qkv_interleaved_per_head(const ModelConfig& config) {
  return config.block.fused_qkv && architecture_def(config.arch).qkv_interleaved_per_head;
}

bool has_hf_row_order(const ModelConfig& config, const WeightSpec& spec) {
  return qkv_interleaved_per_head(config) &&
         (spec.kind == WeightKind::AttnQkv || spec.kind == WeightKind::AttnQkvBias);
}

void qkv_rows_from_hf(const ModelConfig& config, Tensor t) {
  permute_rows(config, t, false);
}

void qkv_rows_to_hf(const ModelConfig& config, Tensor t) {
  permute_rows(config, t, true);
}

}  // namespace lt::model
