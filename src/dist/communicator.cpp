#include "dist/communicator.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace lt::dist {

std::string_view reduce_op_name(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : "average";
}

void check_collective(std::string_view collective, const Tensor& t) {
  LT_CHECK(t.dtype == DType::F64 || t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16,
           "{}: tensor dtype is {}, expected f64, f32, bf16 or f16", collective, dtype_name(t.dtype));
  LT_CHECK(t.numel() == 0 || t.data != nullptr, "{}: tensor of shape {} has no memory", collective,
           t.shape_string());
}

void check_scatter_gather(std::string_view collective, const Tensor& whole, const Tensor& part,
                          int world_size) {
  check_collective(collective, whole);
  check_collective(collective, part);
  LT_CHECK(whole.dtype == part.dtype && whole.device == part.device,
           "{}: the tensors are {} on {} and {} on {}, expected one dtype and device", collective,
           dtype_name(whole.dtype), device_name(whole.device), dtype_name(part.dtype),
           device_name(part.device));
  LT_CHECK(whole.numel() == part.numel() * world_size,
           "{}: the whole tensor has {} elements and the part {}, expected world_size ({}) times the part",
           collective, whole.numel(), part.numel(), world_size);
}

void check_root(int root, int world_size) {
  LT_CHECK(root >= 0 && root < world_size, "broadcast: root rank {} is outside the world of {} ranks", root,
           world_size);
}

int64_t max_over_ranks(Communicator& comm, int64_t mine) {
  double own = double(mine);
  std::vector<double> all(size_t(comm.world_size()), 0.0);
  comm.all_gather(Tensor(&own, DType::F64, {1}), Tensor(all.data(), DType::F64, {int64_t(all.size())}));
  return int64_t(*std::max_element(all.begin(), all.end()));
}

}  // namespace lt::dist
