// One execution of a cuDNN plan (cudnn_execution.h): the variant pack binds the call's pointers to the
// graph's uids, and the handle is bound to the call's stream before it runs.
#include "ops/cuda/cudnn_execution.h"

namespace lt::ops::cuda::cudnn {

void execute(cudnnHandle_t handle, const Candidate& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, cudaStream_t stream) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()),
           pointers.data())
      .set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  check(api().set_stream(handle, stream), "cudnnSetStream");
  check(api().execute(handle, plan.plan.get(), pack.get()), "cudnnBackendExecute");
  LT_CUDA_CHECK_LAUNCH();
}

}  // namespace lt::ops::cuda::cudnn
