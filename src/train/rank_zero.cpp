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

void check_same_run(dist::Communicator& comm, const std::vector<std::pair<std::string, int64_t>>& facts,
                    double timeout_s) {
  if (comm.world_size() == 1) return;
  std::vector<double> mine, rank0;  // exact: the facts are counts far below 2^53
  for (const auto& fact : facts) mine.push_back(double(fact.second));
  rank0 = mine;
  comm.broadcast(Tensor(rank0.data(), DType::F64, {int64_t(rank0.size())}), 0);
  std::string error;
  for (size_t i = 0; i < facts.size() && error.empty(); ++i)
    if (mine[i] != rank0[i])
      error = fmt::format(
          "{} is {}, rank 0's is {}: every rank must train the same run (same configuration "
          "and data)",
          facts[i].first, facts[i].second, int64_t(rank0[i]));
  comm.agree(error, timeout_s);
}

std::string broadcast_text(dist::Communicator& comm, const std::string& text) {
  if (comm.world_size() == 1) return text;
  double size = double(text.size());
  comm.broadcast(Tensor(&size, DType::F64, {1}), 0);
  std::vector<double> bytes(size_t(size), 0.0);
  if (comm.is_main())
    for (size_t i = 0; i < text.size(); ++i) bytes[i] = double(static_cast<unsigned char>(text[i]));
  if (!bytes.empty()) comm.broadcast(Tensor(bytes.data(), DType::F64, {int64_t(bytes.size())}), 0);
  std::string out(bytes.size(), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) out[i] = char(static_cast<unsigned char>(bytes[i]));
  return out;
}

bool stop_requested_on_any_rank(dist::Communicator& comm) {
  double stop = stop_requested() ? 1 : 0;
  if (comm.world_size() > 1) comm.all_reduce(Tensor(&stop, DType::F64, {1}), dist::ReduceOp::Sum);
  return stop > 0;
}

}  // namespace lt::train
