// cuDNN loaded at run time (dlopen + dlsym: the binary neither links nor needs it): the resolved functions,
// why the library is unavailable when it is, one handle per device, and the status check every cuDNN call of
// the attention backend goes through (each step logged to the probe's trace when one runs); the handles
// (with the plans built on them) belong to the runs' contexts (cudnn_plan_cache.h's CudnnState). Private to
// the cuDNN attention backend (cudnn_*.cpp); cudnn_attention.h is its public face.
#pragma once

#include <cudnn_graph.h>  // types and enums only: every function is resolved with dlsym

#include <mutex>
#include <string>
#include <utility>

#include "ops/cuda/cudnn_attention.h"

namespace lt::ops::cuda::cudnn {

struct CudnnApi {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) get_error_string = nullptr;
  decltype(&cudnnGetLastErrorString) get_last_error_string = nullptr;  // optional
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
};

struct Library {
  CudnnApi api;
  CudnnAttentionStatus status;
};

extern std::mutex g_mutex;                 // handles, plans, and set-stream + execute on a handle
extern thread_local std::string* t_trace;  // the probe's log, when one runs on this thread

std::string status_text(const CudnnApi& api, cudnnStatus_t st);
// Loaded on the first call (thread-safe) from `path` (the kernel option cudnn_library of the first context
// that asks), checked by creating a handle on `device`; every later call returns that load.
const Library& library(const std::string& path, int device);
const Library& library();  // the load of the first call with a path (one with no path loads the default)
const CudnnApi& api();
void trace(const std::string& line);
// Throws (and logs) a failed step; a successful one is logged unless `quiet` (attribute settings).
void check(cudnnStatus_t st, const std::string& step, bool quiet = false);

}  // namespace lt::ops::cuda::cudnn
