# Sourced by the GPU-machine scripts: points LT_CUDNN_LIBRARY at a cuDNN 9 for the cuDNN attention backend
# (ops/cuda/cudnn_library.cpp loads it at run time): the one the image's PyTorch wheel carries, unless the
# caller set it. Nothing changes when none is found: attention then runs on leantune's kernels.
if [ -z "${LT_CUDNN_LIBRARY:-}" ]; then
  lt_cudnn_dir=$(python3 -c "import nvidia.cudnn as c; print(list(c.__path__)[0])" 2>/dev/null)
  if [ -n "$lt_cudnn_dir" ] && [ -e "$lt_cudnn_dir/lib/libcudnn.so.9" ]; then
    export LT_CUDNN_LIBRARY="$lt_cudnn_dir/lib/libcudnn.so.9"
  fi
fi
