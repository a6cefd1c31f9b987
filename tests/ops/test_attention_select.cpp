// The choice between cuDNN, the tensor-core kernels and the SIMT kernels for a CUDA attention call
// (ops/cuda/attention_select.h: pure functions, no GPU needed): LT_ATTENTION_KERNEL parsing, which calls
// cuDNN's graph covers, and the fallbacks (ineligible calls and a missing cuDNN never reach cuDNN; an
// explicit "cudnn" request without cuDNN is an error naming why).
#include <gtest/gtest.h>

#include <string>

#include "ops/cuda/attention_select.h"

namespace lt {
namespace {

using ops::AttentionParams;
using ops::cuda::AttentionCallShape;
using ops::cuda::AttentionKernel;
using ops::cuda::AttentionKernelRequest;
using ops::cuda::choose_attention_kernel;
using ops::cuda::cudnn_attention_ineligible_reason;
using ops::cuda::parse_attention_kernel_request;

// A chunk of 200 queries at offset 800 of a 1200-key buffer: what chunked training passes.
AttentionCallShape chunk_call() {
  AttentionCallShape c;
  c.dtype = DType::BF16;
  c.p = AttentionParams{.batch = 2,
                        .q_len = 200,
                        .kv_len = 1200,
                        .heads = 32,
                        .kv_heads = 8,
                        .head_dim = 128,
                        .q_offset = 800,
                        .window = 0,
                        .scale = 0.088};
  return c;
}

TEST(AttentionSelect, ParsesTheRequest) {
  EXPECT_EQ(parse_attention_kernel_request(nullptr), AttentionKernelRequest::Auto);
  EXPECT_EQ(parse_attention_kernel_request(""), AttentionKernelRequest::Auto);
  EXPECT_EQ(parse_attention_kernel_request("auto"), AttentionKernelRequest::Auto);
  EXPECT_EQ(parse_attention_kernel_request("cudnn"), AttentionKernelRequest::Cudnn);
  EXPECT_EQ(parse_attention_kernel_request("tc"), AttentionKernelRequest::TensorCore);
  EXPECT_EQ(parse_attention_kernel_request("simt"), AttentionKernelRequest::Simt);
  try {
    parse_attention_kernel_request("CUDNN");
    FAIL() << "an unknown value must be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LT_ATTENTION_KERNEL"), std::string::npos) << m;
    EXPECT_NE(m.find("'CUDNN'"), std::string::npos) << m;
    EXPECT_NE(m.find("auto, cudnn, tc, simt"), std::string::npos) << m;
  }
}

TEST(AttentionSelect, CudnnCoversCausalGqaBf16WithoutSegmentsOrWindow) {
  AttentionCallShape c = chunk_call();
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  // cuDNN sees the keys up to the last query only: bottom-right causal over them is ops.h's mask.
  EXPECT_EQ(ops::cuda::cudnn_attention_kv_len(c.p), 1000);
  c.p.head_dim = 64;
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  c.p.head_dim = 256;  // Gemma's (cuDNN runs it forward and backward on Hopper)
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  c.p.heads = c.p.kv_heads = 4;  // plain multi-head
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
  c.p.batch = 1, c.p.q_len = 1, c.p.kv_len = 37, c.p.q_offset = 36;  // one query (decode-like)
  EXPECT_EQ(cudnn_attention_ineligible_reason(c), nullptr);
}

TEST(AttentionSelect, IneligibleCallsSayWhy) {
  struct Variant {
    const char* what;
    void (*change)(AttentionCallShape&);
  };
  const Variant variants[] = {
      {"f32", [](AttentionCallShape& c) { c.dtype = DType::F32; }},
      {"head_dim 96", [](AttentionCallShape& c) { c.p.head_dim = 96; }},
      {"head_dim 32", [](AttentionCallShape& c) { c.p.head_dim = 32; }},
      {"head_dim 192", [](AttentionCallShape& c) { c.p.head_dim = 192; }},
      {"head_dim 200", [](AttentionCallShape& c) { c.p.head_dim = 200; }},
      {"segments", [](AttentionCallShape& c) { c.segmented = true; }},
      {"window", [](AttentionCallShape& c) { c.p.window = 64; }},
      {"misaligned", [](AttentionCallShape& c) { c.aligned16 = false; }},
      {"deterministic", [](AttentionCallShape& c) { c.deterministic = true; }},
      {"no queries", [](AttentionCallShape& c) { c.p.q_len = 0; }},
      {"no batch", [](AttentionCallShape& c) { c.p.batch = 0; }},
      {"one query one key", [](AttentionCallShape& c) { c.p.q_len = 1, c.p.kv_len = 1, c.p.q_offset = 0; }},
      {"kv_heads not dividing", [](AttentionCallShape& c) { c.p.kv_heads = 7; }},
  };
  for (const Variant& v : variants) {
    AttentionCallShape c = chunk_call();
    v.change(c);
    const char* reason = cudnn_attention_ineligible_reason(c);
    ASSERT_NE(reason, nullptr) << v.what << " must not go to cuDNN";
    EXPECT_GT(std::string(reason).size(), 5u) << v.what;
    // Whatever the request, an ineligible call takes our kernels.
    for (const AttentionKernelRequest r : {AttentionKernelRequest::Auto, AttentionKernelRequest::Cudnn}) {
      EXPECT_EQ(choose_attention_kernel(r, c, true, "", true), AttentionKernel::TensorCore) << v.what;
      EXPECT_EQ(choose_attention_kernel(r, c, true, "", false), AttentionKernel::Simt) << v.what;
    }
  }
}

TEST(AttentionSelect, AutoPrefersCudnnThenTensorCoresThenSimt) {
  const AttentionCallShape c = chunk_call();
  const auto Auto = AttentionKernelRequest::Auto;
  EXPECT_EQ(choose_attention_kernel(Auto, c, true, "", true), AttentionKernel::Cudnn);
  EXPECT_EQ(choose_attention_kernel(Auto, c, true, "", false), AttentionKernel::Cudnn);
  // cuDNN missing: silently our kernels.
  EXPECT_EQ(choose_attention_kernel(Auto, c, false, "dlopen failed", true), AttentionKernel::TensorCore);
  EXPECT_EQ(choose_attention_kernel(Auto, c, false, "dlopen failed", false), AttentionKernel::Simt);
}

TEST(AttentionSelect, ExplicitRequests) {
  const AttentionCallShape c = chunk_call();
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::Cudnn, c, true, "", true),
            AttentionKernel::Cudnn);
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::TensorCore, c, true, "", true),
            AttentionKernel::TensorCore);
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::TensorCore, c, true, "", false),
            AttentionKernel::Simt);
  EXPECT_EQ(choose_attention_kernel(AttentionKernelRequest::Simt, c, true, "", true), AttentionKernel::Simt);
  // Asking for cuDNN by name when it cannot be loaded is an error that says why.
  try {
    choose_attention_kernel(AttentionKernelRequest::Cudnn, c, false, "dlopen(\"libcudnn.so.9\") failed: nope",
                            true);
    FAIL() << "LT_ATTENTION_KERNEL=cudnn without cuDNN must be an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LT_ATTENTION_KERNEL=cudnn"), std::string::npos) << m;
    EXPECT_NE(m.find("libcudnn.so.9"), std::string::npos) << m;
  }
}

// The run header's attention line: which kernels and, when not cuDNN's, why.
TEST(AttentionSelect, BackendSummarySaysWhichKernelsAndWhy) {
  using ops::cuda::attention_backend_summary;
  using ops::cuda::CudnnLoadResult;
  EXPECT_EQ(ops::cuda::cudnn_version_name(91400), "9.14.0");
  EXPECT_EQ(ops::cuda::cudnn_version_name(92601), "9.26.1");
  const CudnnLoadResult loaded{true, 91600, "/wheel/libcudnn.so.9", ""};
  const CudnnLoadResult old{false, 91400, "libcudnn.so.9",
                            "cuDNN 9.14.0 found at libcudnn.so.9; 9.16.0 or newer"};
  auto has = [](const std::string& line, const std::string& part) {
    return line.find(part) != std::string::npos
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << line << "\nlacks: " << part;
  };
  const std::string with = attention_backend_summary(AttentionKernelRequest::Auto, false, loaded);
  EXPECT_TRUE(has(with, "cuDNN 9.16.0 fused attention"));
  EXPECT_TRUE(has(with, "/wheel/libcudnn.so.9"));
  const std::string without = attention_backend_summary(AttentionKernelRequest::Auto, false, old);
  EXPECT_TRUE(has(without, "leantune kernels"));
  EXPECT_TRUE(has(without, "cuDNN 9.14.0 found at libcudnn.so.9; 9.16.0 or newer"));
  EXPECT_TRUE(has(attention_backend_summary(AttentionKernelRequest::Cudnn, false, old), "will fail"));
  // Deterministic and explicit requests never use cuDNN, loaded or not.
  for (const CudnnLoadResult& c : {loaded, old}) {
    EXPECT_TRUE(has(attention_backend_summary(AttentionKernelRequest::Auto, true, c),
                    "leantune kernels (deterministic"));
    EXPECT_TRUE(
        has(attention_backend_summary(AttentionKernelRequest::TensorCore, false, c), "leantune kernels"));
    EXPECT_TRUE(has(attention_backend_summary(AttentionKernelRequest::Simt, false, c), "CUDA-core kernels"));
  }
}

}  // namespace
}  // namespace lt
