// Programmatic dependent launch (sm_90), device side: a kernel lets the next one on its stream launch early
// and that one waits for it before reading what it wrote. The host side is a cudaLaunchKernelEx with
// cudaLaunchAttributeProgrammaticStreamSerialization (rmsnorm_column_sum.cuh launches one).
#pragma once

namespace lt::ops::cuda {

// Programmatic dependent launch (sm_90): a kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may be launched once every block of the kernel before it
// on the stream has called allow_dependent_launch (or exited), instead of at that kernel's end: its launch
// and block scheduling overlap the tail of the kernel before. It must call wait_for_prior_grid before
// touching what that kernel writes: the wait returns when that kernel has completed and its writes are
// visible. Both are no-ops in a launch without the attribute.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace lt::ops::cuda
