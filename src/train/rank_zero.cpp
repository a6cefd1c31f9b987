#include "train/rank_zero.h"

#include <fmt/core.h>

#include <exception>
#include <string>

#include "train/stop_signal.h"

namespace lt::train {

void write_on_rank_zero(dist::Communicator& comm, const char* what, const std::function<void()>& write,
                        double timeout_s) {
  if (comm.world_size() == 1) return write();
  std::string error;
  if (comm.is_main()) {
    try {
      write();
    } catch (const std::exception& e) {
      error = fmt::format("writing {}: {}", what, e.what());
    }
  }
  comm.agree(error, timeout_s);
}

bool stop_requested_on_any_rank(dist::Communicator& comm) {
  double stop = stop_requested() ? 1 : 0;
  if (comm.world_size() > 1) comm.all_reduce(Tensor(&stop, DType::F64, {1}), dist::ReduceOp::Sum);
  return stop > 0;
}

}  // namespace lt::train
