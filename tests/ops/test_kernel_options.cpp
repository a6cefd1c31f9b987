// ops/kernel_options.h: the kernel options are set by key and value (the configuration's keys and the
// environment overrides both go through set_kernel_option), named back by describe_kernel_options, and a
// scope restores them. The CPU build parses them too; what each option does is tested by the CUDA tests.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "ops/context.h"
#include "ops/kernel_options.h"

namespace lt::ops {
namespace {

std::string error_of(const std::string& key, const std::string& value) {
  KernelOptions o;
  try {
    set_kernel_option(o, key, value, "config.yaml line 4");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KernelOptions, DefaultsAreTheKernelsDefaults) {
  const KernelOptions o;
  EXPECT_EQ(o.attention, AttentionKernelRequest::Auto);
  EXPECT_FALSE(o.deterministic);
  EXPECT_FALSE(o.gemm_tune);
  EXPECT_EQ(o.profile_ops, ProfileOps::Off);
  EXPECT_EQ(o.rmsnorm_forward, RmsNormForwardKernel::Rows);
  EXPECT_EQ(o.rmsnorm_backward, RmsNormBackwardKernel::Pair);
  EXPECT_EQ(o.attention_tc_shape, AttentionTcShape::Default);
  EXPECT_TRUE(o.cudnn_split_backward);
  EXPECT_TRUE(o.cudnn_autotune);
  EXPECT_FALSE(o.cudnn_autotune_log);
  EXPECT_EQ(o.cudnn_library, "libcudnn.so.9");
  EXPECT_FALSE(o.cuda_sync);
}

TEST(KernelOptions, EveryKeyTakesItsValues) {
  KernelOptions o;
  set_kernel_option(o, "attention", "leantune", "t");
  EXPECT_EQ(o.attention, AttentionKernelRequest::TensorCore);
  set_kernel_option(o, "attention", "tc", "t");
  EXPECT_EQ(o.attention, AttentionKernelRequest::TensorCore);
  set_kernel_option(o, "attention", "simt", "t");
  EXPECT_EQ(o.attention, AttentionKernelRequest::Simt);
  set_kernel_option(o, "attention", "cudnn", "t");
  EXPECT_EQ(o.attention, AttentionKernelRequest::Cudnn);
  set_kernel_option(o, "deterministic", "true", "t");
  EXPECT_TRUE(o.deterministic);
  set_kernel_option(o, "gemm_tune", "1", "t");  // the environment's spelling
  EXPECT_TRUE(o.gemm_tune);
  set_kernel_option(o, "profile_ops", "shapes", "t");
  EXPECT_EQ(o.profile_ops, ProfileOps::Shapes);
  set_kernel_option(o, "profile_ops", "1", "t");
  EXPECT_EQ(o.profile_ops, ProfileOps::Ops);
  set_kernel_option(o, "rmsnorm_forward", "general", "t");
  EXPECT_EQ(o.rmsnorm_forward, RmsNormForwardKernel::General);
  set_kernel_option(o, "rmsnorm_backward", "single-pdl", "t");
  EXPECT_EQ(o.rmsnorm_backward, RmsNormBackwardKernel::SinglePdl);
  set_kernel_option(o, "attention_tc_shape", "8x1", "t");
  EXPECT_EQ(o.attention_tc_shape, AttentionTcShape::W8x1);
  set_kernel_option(o, "cudnn_split_backward", "0", "t");
  EXPECT_FALSE(o.cudnn_split_backward);
  set_kernel_option(o, "cudnn_autotune", "off", "t");
  EXPECT_FALSE(o.cudnn_autotune);
  set_kernel_option(o, "cudnn_autotune_log", "on", "t");
  EXPECT_TRUE(o.cudnn_autotune_log);
  set_kernel_option(o, "cudnn_library", "/opt/cudnn/libcudnn.so.9", "t");
  EXPECT_EQ(o.cudnn_library, "/opt/cudnn/libcudnn.so.9");
  set_kernel_option(o, "cuda_sync", "true", "t");
  EXPECT_TRUE(o.cuda_sync);
}

// What describe_kernel_options prints reads back as the same options (the run header and the saved run
// plan name every option in the table's words).
TEST(KernelOptions, DescribedValuesReadBack) {
  KernelOptions o;
  o.attention = AttentionKernelRequest::TensorCore;
  o.deterministic = true;
  o.profile_ops = ProfileOps::Shapes;
  o.rmsnorm_backward = RmsNormBackwardKernel::General;
  o.attention_tc_shape = AttentionTcShape::W4x2;
  o.cudnn_autotune = false;
  o.cudnn_library = "x.so";
  const auto described = describe_kernel_options(o);
  ASSERT_EQ(described.size(), kernel_option_keys().size());
  KernelOptions back;
  for (size_t i = 0; i < described.size(); ++i) {
    EXPECT_EQ(described[i].first, kernel_option_keys()[i]);
    set_kernel_option(back, described[i].first, described[i].second, "t");
  }
  EXPECT_EQ(back, o);
  EXPECT_EQ(described[0], (std::pair<std::string, std::string>{"attention", "leantune"}));
}

TEST(KernelOptions, UnknownKeysAndValuesAreRefusedNamingThem) {
  EXPECT_EQ(
      error_of("atention", "auto"),
      "config.yaml line 4: the kernel option is 'atention', expected one of attention, deterministic, "
      "gemm_tune, profile_ops, rmsnorm_forward, rmsnorm_backward, attention_tc_shape, "
      "cudnn_split_backward, cudnn_autotune, cudnn_autotune_log, cudnn_library, cuda_sync (did you mean "
      "'attention'?)");
  EXPECT_EQ(
      error_of("attention", "cudnnn"),
      "config.yaml line 4: 'attention' is 'cudnnn', expected one of auto, cudnn, tc, simt, leantune (did "
      "you mean 'cudnn'?)");
  EXPECT_NE(error_of("rmsnorm_backward", "fused").find("expected one of pair, single-pdl, general"),
            std::string::npos);
  EXPECT_NE(error_of("gemm_tune", "maybe").find("'gemm_tune' is 'maybe', expected one of false, true"),
            std::string::npos);
}

TEST(KernelOptions, AContextCarriesItsOptionsDeviceAndHandles) {
  // The ops read the context they are given (nothing below them finds one in process state): its options,
  // its device and its GPU handles. Copies of a run's context share that run's handles; another context
  // has its own.
  KernelOptions o = default_context().kernels;
  o.gemm_tune = !o.gemm_tune;
  o.rmsnorm_backward = RmsNormBackwardKernel::General;
  const Context run = context_with(o);
  EXPECT_EQ(run.kernels, o);
  EXPECT_EQ(run.device, 0);
  EXPECT_EQ(run.stream, nullptr);
  ASSERT_NE(run.handles, nullptr);
  const Context copy = run;
  EXPECT_EQ(copy.handles, run.handles);
  EXPECT_EQ(copy.kernels, o);
  const Context other = context_with(o);
  EXPECT_NE(other.handles, run.handles);
  EXPECT_NE(default_context().handles, run.handles);
}

TEST(KernelOptions, EnvironmentOverridesApplyOnTopOfTheGivenOptions) {
  // Whatever this process's environment holds, applying it twice changes nothing more, and each override
  // names a known option.
  KernelOptions o;
  o.gemm_tune = true;
  const KernelOptions once = with_environment_overrides(o);
  EXPECT_EQ(with_environment_overrides(once), once);
  const std::vector<std::string> keys = kernel_option_keys();
  for (const EnvironmentOverride& e : environment_overrides()) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), e.key), keys.end()) << e.variable;
  }
  if (environment_overrides().empty()) {
    EXPECT_EQ(once, o);
  }
}

}  // namespace
}  // namespace lt::ops
