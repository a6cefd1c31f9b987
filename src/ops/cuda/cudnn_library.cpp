// cuDNN loaded at run time (cudnn_library.h): dlopen of libcudnn.so.9 (or the path in the kernel option
// cudnn_library), every function resolved with dlsym, the version checked.
#include "ops/cuda/cudnn_library.h"

#include <dlfcn.h>

#include <map>

#include "ops/cuda/attention_select.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_memory.h"
#include "ops/kernel_options.h"

namespace lt::ops::cuda {

namespace cudnn {

std::mutex g_mutex;
thread_local std::string* t_trace = nullptr;

namespace {

constexpr int64_t kMinVersion = 91600;  // older releases need workarounds (padding masks) we do not build

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && missing.empty()) missing = name;
  return fn != nullptr;
}

Library load_library(const std::string& path, int device) {
  Library l;
  l.status.library = path;
  dlerror();
  void* lib = dlopen(l.status.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.status.reason = fmt::format(
        "dlopen(\"{}\") failed: {} (install cuDNN 9, put its lib directory on LD_LIBRARY_PATH, or set "
        "LT_CUDNN_LIBRARY to libcudnn.so.9's path)",
        l.status.library, err ? err : "unknown error");
    return l;
  }
  CudnnApi& a = l.api;
  std::string missing;
  resolve(lib, "cudnnGetVersion", a.get_version, missing);
  resolve(lib, "cudnnGetErrorString", a.get_error_string, missing);
  resolve(lib, "cudnnCreate", a.create, missing);
  resolve(lib, "cudnnDestroy", a.destroy, missing);
  resolve(lib, "cudnnSetStream", a.set_stream, missing);
  resolve(lib, "cudnnBackendCreateDescriptor", a.create_descriptor, missing);
  resolve(lib, "cudnnBackendDestroyDescriptor", a.destroy_descriptor, missing);
  resolve(lib, "cudnnBackendSetAttribute", a.set_attribute, missing);
  resolve(lib, "cudnnBackendGetAttribute", a.get_attribute, missing);
  resolve(lib, "cudnnBackendFinalize", a.finalize, missing);
  resolve(lib, "cudnnBackendExecute", a.execute, missing);
  std::string optional_missing;
  resolve(lib, "cudnnGetLastErrorString", a.get_last_error_string, optional_missing);
  if (!missing.empty()) {
    l.status.reason = fmt::format("{} has no symbol {}; expected cuDNN 9", l.status.library, missing);
    return l;
  }
  l.status.version = int64_t(a.get_version());
  if (l.status.version < kMinVersion) {
    l.status.reason =
        fmt::format("cuDNN {} found at {}; {} or newer needed (LT_CUDNN_LIBRARY names another)",
                    cudnn_version_name(l.status.version), l.status.library, cudnn_version_name(kMinVersion));
    return l;
  }
  if (device_count() == 0) {
    l.status.reason = "no CUDA device";
    return l;
  }
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t st = a.create(&handle);
  if (st != CUDNN_STATUS_SUCCESS) {
    l.status.reason = fmt::format("cudnnCreate failed on device {}: {}", device, status_text(a, st));
    return l;
  }
  a.destroy(handle);  // the runs make their own (their contexts' CudnnState)
  l.status.available = true;
  return l;
}

}  // namespace

std::string status_text(const CudnnApi& api, cudnnStatus_t st) {
  std::string text = fmt::format("{} ({})", api.get_error_string ? api.get_error_string(st) : "?", int(st));
  if (api.get_last_error_string) {
    char buf[2048] = {0};
    api.get_last_error_string(buf, sizeof(buf));
    if (buf[0]) text += fmt::format(" [{}]", buf);
  }
  return text;
}

const Library& library(const std::string& path, int device) {
  static const Library lib = [&] {
    std::lock_guard<std::mutex> lock(g_mutex);
    return load_library(path, device);
  }();
  return lib;
}

const Library& library() {
  return library(KernelOptions{}.cudnn_library, 0);
}

const CudnnApi& api() {
  return library().api;
}

void trace(const std::string& line) {
  if (t_trace) *t_trace += line + "\n";
}

void check(cudnnStatus_t st, const std::string& step, bool quiet) {
  if (st != CUDNN_STATUS_SUCCESS) {
    const std::string text = status_text(api(), st);
    trace(fmt::format("  FAIL  {}: {}", step, text));
    LT_FAIL("cuDNN attention: {} failed: {}", step, text);
  }
  if (!quiet) trace(fmt::format("  ok    {}", step));
}

}  // namespace cudnn

const CudnnAttentionStatus& cudnn_attention_status(const Context& ctx) {
  return cudnn::library(ctx.kernels.cudnn_library, ctx.device).status;
}

std::string cudnn_attention_status_line(const Context& ctx) {
  const CudnnAttentionStatus& s = cudnn_attention_status(ctx);
  if (s.available)
    return fmt::format("cudnn attention: available (cuDNN {}, {})", cudnn_version_name(s.version), s.library);
  return fmt::format("cudnn attention: unavailable: {}", s.reason);
}

}  // namespace lt::ops::cuda
