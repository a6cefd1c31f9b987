// The kernel options: which GPU kernels and tuning the ops take, one struct for every switch. They travel in
// the op call's context (ops/context.h): a run puts them there once (the trainer, from the configuration's
// keys: attention, deterministic, gemm_tune, profile_ops); tests make a context with theirs. Environment
// variables remain as
// development overrides of the same options, read once (environment_overrides, through core/process_env.h:
// the run header prints the ones that are set). No CUDA types: the CPU build parses and prints them too.
//
//   option               environment variable         values (default first)
//   attention            LT_ATTENTION_KERNEL          auto | cudnn | leantune (also: tc) | simt
//   deterministic        LT_ATTENTION_DETERMINISTIC   false | true
//   gemm_tune            LT_GEMM_TUNE                 false | true
//   profile_ops          LT_PROFILE_OPS               off | ops (also: 1) | shapes
//   rmsnorm_forward      LT_RMSNORM_FORWARD           rows | general
//   rmsnorm_backward     LT_RMSNORM_BACKWARD          pair | single-pdl | general
//   attention_tc_shape   LT_ATTENTION_TC_SHAPE        default | 4x1 | 8x1 | 4x2
//   cudnn_split_backward LT_CUDNN_SPLIT_BACKWARD      true | false
//   cudnn_autotune       LT_CUDNN_AUTOTUNE            true | false
//   cudnn_autotune_log   LT_CUDNN_AUTOTUNE_LOG        false | true
//   cudnn_library        LT_CUDNN_LIBRARY             libcudnn.so.9 | a path
//   cuda_sync            LEANTUNE_CUDA_SYNC           false | true
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt::ops {

// Which attention implementation GPU calls take (ops/cuda/attention_select.h): auto: cuDNN's fused
// attention when cuDNN 9 loads and covers the call, else leantune's tensor-core kernels where eligible,
// else the CUDA-core ones; cudnn: the same, but a missing cuDNN is an error; leantune (TensorCore): never
// cuDNN; simt: always the CUDA-core kernels.
enum class AttentionKernelRequest : uint8_t { Auto, Cudnn, TensorCore, Simt };
// Per-op GPU time (ops/cuda/op_profile.h): off, per op, or per op and call shape.
enum class ProfileOps : uint8_t { Off, Ops, Shapes };
// RMSNorm kernels (ops/cuda/rmsnorm_select.h says what each is).
enum class RmsNormForwardKernel : uint8_t { Rows, General };
enum class RmsNormBackwardKernel : uint8_t { Pair, SinglePdl, General };
// The tensor-core attention forward's CTA shape (warps x row tiles); Default: the kernel's own choice.
enum class AttentionTcShape : uint8_t { Default, W4x1, W8x1, W4x2 };

struct KernelOptions {
  AttentionKernelRequest attention = AttentionKernelRequest::Auto;
  bool deterministic = false;  // bit-identical runs: no cuDNN attention, no timed GEMM algorithm choice
  bool gemm_tune = false;      // time cuBLASLt's candidate algorithms on a GEMM shape's first call
  ProfileOps profile_ops = ProfileOps::Off;
  RmsNormForwardKernel rmsnorm_forward = RmsNormForwardKernel::Rows;
  RmsNormBackwardKernel rmsnorm_backward = RmsNormBackwardKernel::Pair;
  AttentionTcShape attention_tc_shape = AttentionTcShape::Default;
  bool cudnn_split_backward = true;  // a chunk's cuDNN backward as two calls (diagonal block apart)
  bool cudnn_autotune = true;        // time cuDNN's engines on a shape's first call
  bool cudnn_autotune_log = false;   // print each autotune choice
  std::string cudnn_library = "libcudnn.so.9";
  bool cuda_sync = false;  // wait for the device after every op call (errors at the op that caused them)

  bool operator==(const KernelOptions&) const = default;
};

// Sets the option named `key` (the table above) from text; an unknown key or value is refused naming
// `where`, the key, the value and what is accepted.
void set_kernel_option(KernelOptions& options, std::string_view key, std::string_view value,
                       std::string_view where);
// Every option's key, in the table's order.
std::vector<std::string> kernel_option_keys();

// An environment variable that overrides an option, as found at the first call (read once).
struct EnvironmentOverride {
  std::string variable, key, value;
};
const std::vector<EnvironmentOverride>& environment_overrides();
// `options` with the environment's overrides applied.
KernelOptions with_environment_overrides(KernelOptions options);

// "key: value" per option, in the table's order (for the run header and the saved run plan).
std::vector<std::pair<std::string, std::string>> describe_kernel_options(const KernelOptions& options);
const char* attention_request_name(AttentionKernelRequest request);  // auto | cudnn | leantune | simt

}  // namespace lt::ops
