#include "dist/single_communicator.h"

#include "core/error.h"
#include "ops/device.h"

namespace lt::dist {

void SingleCommunicator::all_reduce(Tensor t, ReduceOp) {
  check_collective("all_reduce", t);
}

void SingleCommunicator::reduce_scatter(Tensor in, Tensor out, ReduceOp) {
  check_scatter_gather("reduce_scatter", in, out, 1);
  if (in.data != out.data) ops::copy(ctx_, out, in);
}

void SingleCommunicator::all_gather(Tensor in, Tensor out) {
  check_scatter_gather("all_gather", out, in, 1);
  if (in.data != out.data) ops::copy(ctx_, out, in);
}

void SingleCommunicator::broadcast(Tensor t, int root) {
  check_collective("broadcast", t);
  check_root(root, 1);
}

void SingleCommunicator::agree(const std::string& local_error, double) {
  if (!local_error.empty()) LT_FAIL("{}", local_error);
}

}  // namespace lt::dist
