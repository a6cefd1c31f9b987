// One process, world size 1: today's training. Every reduction over one rank is the identity (the sum of
// one value, the average of one value), so all_reduce and broadcast leave the tensor as it is and
// reduce_scatter / all_gather are a copy when the two tensors are different memory. Bit-identical to not
// communicating at all; the argument checks are the only cost.
#pragma once

#include "dist/communicator.h"
#include "ops/context.h"

namespace lt::dist {

class SingleCommunicator final : public Communicator {
 public:
  // The copies of reduce_scatter and all_gather run in `ctx`.
  explicit SingleCommunicator(const ops::Context& ctx = ops::default_context()) : ctx_(ctx) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "single"; }

  void all_reduce(Tensor t, ReduceOp op) override;
  void reduce_scatter(Tensor in, Tensor out, ReduceOp op) override;
  void all_gather(Tensor in, Tensor out) override;
  void broadcast(Tensor t, int root) override;
  void barrier() override {}
  // Throws the local error as it is (there is no other rank to name).
  void agree(const std::string& local_error, double timeout_s) override;

 private:
  ops::Context ctx_;
};

}  // namespace lt::dist
