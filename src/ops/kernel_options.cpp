#include "ops/kernel_options.h"

#include <functional>
#include <span>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/process_env.h"

namespace lt::ops {
namespace {

constexpr EnumName<AttentionKernelRequest> kAttentionNames[] = {
    {AttentionKernelRequest::Auto, "auto"},
    {AttentionKernelRequest::Cudnn, "cudnn"},
    {AttentionKernelRequest::TensorCore, "tc"},  // the tensor-core kernels' own name (LT_ATTENTION_KERNEL)
    {AttentionKernelRequest::Simt, "simt"},
    {AttentionKernelRequest::TensorCore, "leantune"},  // the configuration's name for them
};
constexpr EnumName<ProfileOps> kProfileNames[] = {
    {ProfileOps::Off, "off"}, {ProfileOps::Ops, "ops"}, {ProfileOps::Shapes, "shapes"},
    {ProfileOps::Off, "0"},   {ProfileOps::Ops, "1"},
};
constexpr EnumName<RmsNormForwardKernel> kRmsNormForwardNames[] = {
    {RmsNormForwardKernel::Rows, "rows"},
    {RmsNormForwardKernel::General, "general"},
};
constexpr EnumName<RmsNormBackwardKernel> kRmsNormBackwardNames[] = {
    {RmsNormBackwardKernel::Pair, "pair"},
    {RmsNormBackwardKernel::SinglePdl, "single-pdl"},
    {RmsNormBackwardKernel::General, "general"},
};
constexpr EnumName<AttentionTcShape> kTcShapeNames[] = {
    {AttentionTcShape::Default, "default"},
    {AttentionTcShape::W4x1, "4x1"},
    {AttentionTcShape::W8x1, "8x1"},
    {AttentionTcShape::W4x2, "4x2"},
};
constexpr EnumName<bool> kBoolNames[] = {
    {false, "false"}, {true, "true"}, {false, "0"},  {true, "1"},
    {false, "off"},   {true, "on"},   {false, "no"}, {true, "yes"},
};

struct Option {
  const char* key;
  const char* variable;  // the environment override
  std::function<void(KernelOptions&, std::string_view value, std::string_view where)> set;
  std::function<std::string(const KernelOptions&)> get;
};

template <class E, size_t N>
Option enum_option(const char* key, const char* variable, E KernelOptions::*member,
                   const EnumName<E> (&table)[N]) {
  const std::span<const EnumName<E>> names(table);
  return Option{key, variable,
                [member, names](KernelOptions& o, std::string_view value, std::string_view where) {
                  o.*member = parse_enum(names, value, where);
                },
                [member, names](const KernelOptions& o) { return std::string(enum_name(names, o.*member)); }};
}

const std::vector<Option>& options_table() {
  using K = KernelOptions;
  static const std::vector<Option> table = {
      Option{"attention", "LT_ATTENTION_KERNEL",
             [](K& o, std::string_view value, std::string_view where) {
               o.attention = parse_enum(std::span<const EnumName<AttentionKernelRequest>>(kAttentionNames),
                                        value, where);
             },
             [](const K& o) { return std::string(attention_request_name(o.attention)); }},
      enum_option("deterministic", "LT_ATTENTION_DETERMINISTIC", &K::deterministic, kBoolNames),
      enum_option("gemm_tune", "LT_GEMM_TUNE", &K::gemm_tune, kBoolNames),
      enum_option("profile_ops", "LT_PROFILE_OPS", &K::profile_ops, kProfileNames),
      enum_option("rmsnorm_forward", "LT_RMSNORM_FORWARD", &K::rmsnorm_forward, kRmsNormForwardNames),
      enum_option("rmsnorm_backward", "LT_RMSNORM_BACKWARD", &K::rmsnorm_backward, kRmsNormBackwardNames),
      enum_option("attention_tc_shape", "LT_ATTENTION_TC_SHAPE", &K::attention_tc_shape, kTcShapeNames),
      enum_option("cudnn_split_backward", "LT_CUDNN_SPLIT_BACKWARD", &K::cudnn_split_backward, kBoolNames),
      enum_option("cudnn_autotune", "LT_CUDNN_AUTOTUNE", &K::cudnn_autotune, kBoolNames),
      enum_option("cudnn_autotune_log", "LT_CUDNN_AUTOTUNE_LOG", &K::cudnn_autotune_log, kBoolNames),
      Option{"cudnn_library", "LT_CUDNN_LIBRARY",
             [](K& o, std::string_view value, std::string_view) { o.cudnn_library = std::string(value); },
             [](const K& o) { return o.cudnn_library; }},
      enum_option("cuda_sync", "LEANTUNE_CUDA_SYNC", &K::cuda_sync, kBoolNames),
  };
  return table;
}

}  // namespace

void set_kernel_option(KernelOptions& options, std::string_view key, std::string_view value,
                       std::string_view where) {
  for (const Option& o : options_table()) {
    if (key != o.key) continue;
    o.set(options, value, fmt::format("{}: '{}'", where, key));
    return;
  }
  fail_unknown_name(fmt::format("{}: the kernel option", where), key, kernel_option_keys());
}

std::vector<std::string> kernel_option_keys() {
  std::vector<std::string> keys;
  for (const Option& o : options_table()) keys.emplace_back(o.key);
  return keys;
}

// Read once, through the process environment's reader (core/process_env.h).
const std::vector<EnvironmentOverride>& environment_overrides() {
  static const std::vector<EnvironmentOverride> found = [] {
    std::vector<EnvironmentOverride> out;
    for (const Option& o : options_table()) {
      const std::string value = environment_variable(o.variable).value_or("");
      if (!value.empty()) out.push_back({o.variable, o.key, value});
    }
    return out;
  }();
  return found;
}

KernelOptions with_environment_overrides(KernelOptions options) {
  for (const EnvironmentOverride& e : environment_overrides())
    set_kernel_option(options, e.key, e.value, fmt::format("environment variable {}", e.variable));
  return options;
}

std::vector<std::pair<std::string, std::string>> describe_kernel_options(const KernelOptions& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Option& o : options_table()) out.emplace_back(o.key, o.get(options));
  return out;
}

const char* attention_request_name(AttentionKernelRequest request) {
  if (request == AttentionKernelRequest::TensorCore) return "leantune";  // the configuration's name
  return enum_name(std::span<const EnumName<AttentionKernelRequest>>(kAttentionNames), request);
}

}  // namespace lt::ops
