#include "ops/device.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype_visit.h"
#include "core/error.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

#if defined(LT_HAVE_CUDA)
#include "ops/cuda/attention_select.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/cudnn_attention.h"
#include "ops/cuda/device_memory.h"
#endif

namespace lt::ops {
namespace {

// x *= factor: f64 in double, the others in float with one rounding at the store.
template <class T>
void scale_host(T* x, int64_t n, double factor) {
  const float f = float(factor);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, double>) {
      x[i] = x[i] * factor;
    } else if constexpr (std::is_same_v<T, float>) {
      x[i] = x[i] * f;
    } else if constexpr (std::is_same_v<T, bf16>) {
      x[i] = to_bf16(to_float(x[i]) * f);
    } else {
      x[i] = to_fp16(to_float(x[i]) * f);
    }
  }
}

void check_copy(const Tensor& dst, const Tensor& src) {
  LT_CHECK(!dst.empty() && !src.empty(), "copy: dst or src is missing (empty view)");
  LT_CHECK(dst.numel() == src.numel(), "copy: dst {} and src {} differ in element count", dst.shape_string(),
           src.shape_string());
  LT_CHECK(dst.dtype == src.dtype || (is_floating(dst.dtype) && is_floating(src.dtype)),
           "copy: dtypes {} and {}; only floating dtypes convert", dtype_name(dst.dtype),
           dtype_name(src.dtype));
}

}  // namespace

bool cuda_available() {
#if defined(LT_HAVE_CUDA)
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

MemoryResource& memory_resource(Device device) {
  if (device == Device::CPU) return HostMemory::instance();
#if defined(LT_HAVE_CUDA)
  LT_CHECK(cuda::device_count() > 0, "device cuda: no GPU is visible (CUDA_VISIBLE_DEVICES, driver?)");
  return cuda::DeviceMemory::instance();
#else
  fail_no_cuda("device memory");
#endif
}

DeviceMemoryInfo device_memory_info(Device device) {
  if (device == Device::CPU) return {};
#if defined(LT_HAVE_CUDA)
  const cuda::DeviceInfo info = cuda::device_info();  // this process's GPU (a rank's own)
  return {info.free_bytes, info.total_bytes};
#else
  fail_no_cuda("device memory info");
#endif
}

int gpu_count() {
#if defined(LT_HAVE_CUDA)
  return cuda::device_count();
#else
  return 0;
#endif
}

std::string device_description(Device device) {
  if (device == Device::CPU) return "cpu";
#if defined(LT_HAVE_CUDA)
  const cuda::DeviceInfo info = cuda::device_info();  // this process's GPU (a rank's own)
  return fmt::format("{} (sm_{}{})", info.name, info.major, info.minor);
#else
  fail_no_cuda("device description");
#endif
}

void synchronize(const Context& ctx, Device device) {
  if (device == Device::CPU) return;
#if defined(LT_HAVE_CUDA)
  cuda::synchronize(ctx);
#else
  (void)ctx;
  fail_no_cuda("synchronize");
#endif
}

void zero(const Context& ctx, Tensor t) {
  if (t.empty() || t.numel() == 0) return;
  if (t.device == Device::CPU) {
    std::memset(t.data, 0, t.bytes());
    return;
  }
#if defined(LT_HAVE_CUDA)
  cuda::DebugSync sync(ctx);
  cuda::zero(ctx, t);
#else
  (void)ctx;
  fail_no_cuda("zero");
#endif
}

void copy(const Context& ctx, Tensor dst, Tensor src) {
  check_copy(dst, src);
  if (dst.numel() == 0) return;
  if (dst.device == src.device) {
    if (dst.dtype == src.dtype && dst.device == Device::CPU) {
      std::memcpy(dst.data, src.data, src.bytes());
      return;
    }
    if (dst.dtype != src.dtype) {  // a same-device conversion is a cast of equal shapes
      Tensor flat_dst = dst.reshaped({dst.numel()}), flat_src = src.reshaped({src.numel()});
      cast(ctx, flat_dst, flat_src);
      return;
    }
  }
#if defined(LT_HAVE_CUDA)
  cuda::DebugSync sync(ctx);
  if (dst.dtype == src.dtype) {
    cuda::copy_bytes(ctx, dst, src);
    return;
  }
  // A transfer that converts: convert on the host side, move the bytes as they are.
  const int64_t n = src.numel();
  if (dst.device == Device::CPU) {  // device src -> host staging (src dtype) -> dst
    std::vector<char> staging(src.bytes());
    Tensor host_src(staging.data(), src.dtype, {n});
    cuda::copy_bytes(ctx, host_src, src);
    cast(ctx, dst.reshaped({n}), host_src);
  } else {  // host src -> host staging (dst dtype) -> device dst
    std::vector<char> staging(dst.bytes());
    Tensor host_dst(staging.data(), dst.dtype, {n});
    cast(ctx, host_dst, src.reshaped({n}));
    cuda::copy_bytes(ctx, dst, host_dst);
  }
#else
  (void)ctx;
  fail_no_cuda("copy");
#endif
}

std::string attention_backend_summary(const Context& ctx) {
#if defined(LT_HAVE_CUDA)
  const KernelOptions& options = ctx.kernels;
  const cuda::AttentionKernelRequest request = options.attention;
  const bool deterministic = options.deterministic;
  cuda::CudnnLoadResult cudnn;
  const bool may_load = !deterministic && (request == cuda::AttentionKernelRequest::Auto ||
                                           request == cuda::AttentionKernelRequest::Cudnn);
  if (may_load) {
    const cuda::CudnnAttentionStatus& st = cuda::cudnn_attention_status(ctx);  // loads from its path
    cudnn = {st.available, st.version, st.library, st.reason};
  }
  return cuda::attention_backend_summary(request, deterministic, cudnn);
#else
  (void)ctx;
  return "the CPU reference kernels (a build without CUDA)";
#endif
}

MemoryResource& staging_memory(Device device) {
  if (device == Device::CPU) return HostMemory::instance();
#if defined(LT_HAVE_CUDA)
  return cuda::PinnedHostMemory::instance();
#else
  fail_no_cuda("staging memory");
#endif
}

#if defined(LT_HAVE_CUDA)
struct TransferQueue::Impl {
  explicit Impl(const Context& ctx) : stream(ctx) {}
  cuda::TransferStream stream;
};
#else
struct TransferQueue::Impl {};
#endif

TransferQueue::TransferQueue(const Context& ctx, Device device) : ctx_(ctx), device_(device) {
  if (device == Device::CPU) return;
#if defined(LT_HAVE_CUDA)
  impl_ = std::make_unique<Impl>(ctx_);
#else
  fail_no_cuda("transfer queue");
#endif
}

TransferQueue::~TransferQueue() = default;

int64_t TransferQueue::copy(Tensor dst, Tensor src) {
  LT_CHECK(dst.bytes() == src.bytes() && dst.dtype == src.dtype, "transfer: {} {} into {} {}",
           dtype_name(src.dtype), src.shape_string(), dtype_name(dst.dtype), dst.shape_string());
  if (device_ == Device::CPU) {
    std::memcpy(dst.data, src.data, src.bytes());
    return 0;
  }
#if defined(LT_HAVE_CUDA)
  return impl_->stream.copy(dst, src);
#else
  fail_no_cuda("transfer queue");
#endif
}

void TransferQueue::compute_waits_for(int64_t ticket) {
  if (device_ == Device::CPU) return;
#if defined(LT_HAVE_CUDA)
  impl_->stream.compute_waits_for(ticket);
#else
  (void)ticket;
  fail_no_cuda("transfer queue");
#endif
}

void scale_inplace(const Context& ctx, Tensor t, double factor) {
  if (t.empty() || t.numel() == 0) return;
  LT_CHECK(is_floating(t.dtype), "scale: dtype {} is not floating", dtype_name(t.dtype));
  if (t.device == Device::CPU) {
    visit_floating(t.dtype, "scale", [&](auto tag) {
      scale_host(static_cast<typename decltype(tag)::type*>(t.data), t.numel(), factor);
    });
    return;
  }
#if defined(LT_HAVE_CUDA)
  cuda::DebugSync sync(ctx);
  cuda::scale_inplace(ctx, t, factor);
#else
  (void)ctx;
  fail_no_cuda("scale");
#endif
}

}  // namespace lt::ops
