// cuDNN's attention graph has no soft-capping: a capped call is not eligible (auto falls back to
// leantune's CUDA-core kernels, which apply it) and says why.
#include <gtest/gtest.h>

#include <string>

#include "ops/cuda/attention_select.h"

namespace lt::ops::cuda {
namespace {

TEST(AttentionSoftcapSelect, CudnnRefusesSoftCappingByName) {
  AttentionCallShape c;
  c.dtype = DType::BF16;
  c.p = {.batch = 2, .q_len = 128, .kv_len = 128, .heads = 8, .kv_heads = 4, .head_dim = 128, .scale = 0.1};
  ASSERT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  c.p.softcap = 50.0;
  ASSERT_NE(cudnn_attention_ineligible_reason(c), nullptr);
  EXPECT_EQ(std::string(cudnn_attention_ineligible_reason(c)), "attention-logit soft-capping");
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::Auto, c, true, "", false), AttentionKernel::Simt);
}

}  // namespace
}  // namespace lt::ops::cuda
