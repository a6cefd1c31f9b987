// Which attention implementation a CUDA call takes: cuDNN's fused flash attention (cudnn_attention.cpp),
// our tensor-core kernels (attention_tc.cu, attention_tc_bwd.cu) or the CUDA-core kernels
// (attention.cu).
// Pure functions of the call's shape and the request, with no CUDA types: the CPU build tests them.
//
// The request is the kernel option `attention` (ops/kernel_options.h; the configuration key attention, or
// LT_ATTENTION_KERNEL for development):
//   auto:  cuDNN when the call is eligible and cuDNN loaded, else tensor cores where eligible, else SIMT;
//   cudnn: the same order, but a missing cuDNN is an error (naming why it could not be loaded) instead of a
//          silent fallback; calls cuDNN cannot take (segments, window, f32, head_dim ...) still fall back;
//   tc (the configuration's leantune): never cuDNN; tensor cores where eligible, else SIMT;
//   simt:  always the CUDA-core kernels.
// A deterministic request (the option deterministic) never takes cuDNN: its backward accumulates dQ with
// atomics (the run-to-run order of the additions varies), while our kernels use none.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/kernel_options.h"
#include "ops/ops.h"

namespace lt::ops::cuda {

enum class AttentionKernel : uint8_t { Cudnn, TensorCore, Simt };
using ops::AttentionKernelRequest;

inline const char* attention_kernel_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::Cudnn:
      return "cudnn";
    case AttentionKernel::TensorCore:
      return "tc";
    case AttentionKernel::Simt:
      return "simt";
  }
  return "?";
}

// The value of LT_ATTENTION_KERNEL (nullptr or empty = unset: auto), parsed as the options reader does.
inline AttentionKernelRequest parse_attention_kernel_request(const char* value) {
  if (value == nullptr || *value == '\0') return AttentionKernelRequest::Auto;
  KernelOptions options;
  set_kernel_option(options, "attention", value, "LT_ATTENTION_KERNEL");
  return options.attention;
}

// What the selection needs to know about one call.
struct AttentionCallShape {
  DType dtype = DType::BF16;
  AttentionParams p{};
  bool segmented = false;      // q_segments / k_segments given (packed sequences)
  bool aligned16 = true;       // every data pointer of the call is 16-byte aligned
  bool deterministic = false;  // bit-identical results run to run were requested
};

// The key range cuDNN is given: the keys the last query sees. ops.h allows kv_len > q_offset + q_len (the
// chunked decoder passes its whole K/V buffer); keys past q_offset + q_len are invisible to every query, so
// cuDNN gets a view that stops there and bottom-right-aligned causal masking is then exactly ops.h's.
inline int64_t cudnn_attention_kv_len(const AttentionParams& p) {
  return p.q_offset + p.q_len;
}

// nullptr when cuDNN's graph (bf16, causal bottom-right, GQA, head_dim 64/128/256, ALiBi or none) covers the
// call, else why not. ALiBi is exact on cuDNN whole or chunked: the graph adds our slopes times each key's
// absolute position (cudnn_attention_graph.cpp's apply_alibi); packed segments, which restart positions,
// are refused for every call. Head dims above 128 run forward (cuDNN 9.1) and backward (9.5; we require 9.16)
// on Hopper, the architecture the build targets; where cuDNN builds no plan for a shape, the call falls back
// to our kernels (attention_host.cpp).
inline const char* cudnn_attention_ineligible_reason(const AttentionCallShape& c) {
  const AttentionParams& p = c.p;
  if (c.deterministic)
    return "deterministic attention requested (cuDNN's backward accumulates dQ atomically)";
  if (c.dtype != DType::BF16) return "dtype is not bf16";
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return "head_dim is not 64, 128 or 256";
  if (c.segmented) return "packed segments";
  if (p.window != 0) return "sliding window";
  if (p.softcap != 0.0) return "attention-logit soft-capping";
  if (p.batch < 1 || p.q_len < 1) return "empty call";
  if (p.kv_heads < 1 || p.heads % p.kv_heads != 0) return "kv_heads does not divide heads";
  if (!c.aligned16) return "a tensor is not 16-byte aligned";
  const int64_t s = cudnn_attention_kv_len(p);
  if (s > p.kv_len) return "q_offset + q_len exceeds kv_len";
  if (p.q_len == 1 && s == 1) return "q_len = kv_len = 1 (cuDNN's backward does not take it)";
  if (s >= (int64_t(1) << 31) || p.q_len >= (int64_t(1) << 31))
    return "sequence longer than the int32 index range of cuDNN's masks";
  return nullptr;
}

// The implementation the call takes. cudnn_loaded: cuDNN could be loaded (cudnn_attention_status());
// cudnn_unavailable_reason: why not, for the error of an explicit "cudnn" request; tc_eligible: what
// attention_tc_eligible says of the call.
inline AttentionKernel choose_attention_kernel(AttentionKernelRequest request, const AttentionCallShape& call,
                                               bool cudnn_loaded, std::string_view cudnn_unavailable_reason,
                                               bool tc_eligible) {
  if (request == AttentionKernelRequest::Simt) return AttentionKernel::Simt;
  if (request == AttentionKernelRequest::Cudnn)
    LT_CHECK(cudnn_loaded, "LT_ATTENTION_KERNEL=cudnn, but cuDNN is unavailable: {}",
             cudnn_unavailable_reason);
  const bool want_cudnn = request == AttentionKernelRequest::Auto || request == AttentionKernelRequest::Cudnn;
  if (want_cudnn && cudnn_loaded && cudnn_attention_ineligible_reason(call) == nullptr)
    return AttentionKernel::Cudnn;
  return tc_eligible ? AttentionKernel::TensorCore : AttentionKernel::Simt;
}

// "9.14.0" for cudnnGetVersion()'s 91400 (cuDNN 9 encodes major * 10000 + minor * 100 + patch).
inline std::string cudnn_version_name(int64_t version) {
  return fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
}

// What cuDNN's loading told (cudnn_attention_status()), for attention_backend_summary.
struct CudnnLoadResult {
  bool available = false;
  int64_t version = 0;
  std::string_view library, reason;
};

// One line for the run header: which kernels the run's attention calls take under `request` and, when that
// is not cuDNN's, why. `cudnn` is only read for the auto and cudnn requests that are not deterministic (the
// others never load cuDNN).
inline std::string attention_backend_summary(AttentionKernelRequest request, bool deterministic,
                                             const CudnnLoadResult& cudnn) {
  switch (request) {
    case AttentionKernelRequest::Simt:
      return "leantune's CUDA-core kernels (LT_ATTENTION_KERNEL=simt)";
    case AttentionKernelRequest::TensorCore:
      return "leantune kernels (attention: leantune)";
    case AttentionKernelRequest::Auto:
    case AttentionKernelRequest::Cudnn:
      break;
  }
  if (deterministic)
    return "leantune kernels (deterministic: cuDNN's backward adds dQ atomically, in a run-dependent order)";
  if (cudnn.available)
    return fmt::format(
        "cuDNN {} fused attention ({}) for bf16 calls with head_dim 64, 128 or 256 and no packing, window "
        "or soft-cap, leantune kernels for the others",
        cudnn_version_name(cudnn.version), cudnn.library);
  if (request == AttentionKernelRequest::Cudnn)
    return fmt::format("cuDNN requested, but unavailable: {} (attention calls will fail)", cudnn.reason);
  return fmt::format("leantune kernels (cuDNN unavailable: {})", cudnn.reason);
}

}  // namespace lt::ops::cuda
