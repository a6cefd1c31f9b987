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

// Gemma 2's attention (head_dim 256, soft-capped, a sliding window on its local layers) runs on the CUDA-core
// kernels whatever the request: cuDNN and the tensor-core kernels decline the cap (and the tensor-core ones
// head_dim 256). Without cap and window, cuDNN takes head_dim 256.
TEST(AttentionSoftcapSelect, Gemma2HeadDim256TakesTheCudaCoreKernels) {
  AttentionCallShape c;
  c.dtype = DType::BF16;
  c.p = {.batch = 1,
         .q_len = 512,
         .kv_len = 512,
         .heads = 8,
         .kv_heads = 4,
         .head_dim = 256,
         .window = 4096,
         .scale = 0.0625,
         .softcap = 50.0};
  for (const int64_t window : {int64_t(4096), int64_t(0)}) {
    c.p.window = window;
    EXPECT_NE(cudnn_attention_ineligible_reason(c), nullptr) << "window " << window;
    for (const AttentionKernelRequest r : {AttentionKernelRequest::Auto, AttentionKernelRequest::Cudnn,
                                           AttentionKernelRequest::TensorCore, AttentionKernelRequest::Simt})
      EXPECT_EQ(choose_attention_kernel(r, c, true, "", false), AttentionKernel::Simt) << "window " << window;
  }
  c.p.softcap = 0.0;
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::Auto, c, true, "", false),
            AttentionKernel::Cudnn);
  c.p.window = 4096;
  EXPECT_EQ(std::string(cudnn_attention_ineligible_reason(c)), "sliding window");
}

}  // namespace
}  // namespace lt::ops::cuda
