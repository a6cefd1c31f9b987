// A CPU-only build: the NCCL communicator is refused with a message.
#include "core/error.h"
#include "dist/nccl_communicator.h"

namespace lt::dist {

bool nccl_available() {
  return false;
}

std::unique_ptr<Communicator> make_nccl_communicator(const Launch& launch, double, const ops::Context&) {
  LT_FAIL("{}: the NCCL communicator needs the CUDA build of leantune (cmake --preset cuda)",
          describe(launch));
}

}  // namespace lt::dist
