// The smallest rendezvous that needs no MPI: rank 0 listens on MASTER_PORT, every other rank connects to
// MASTER_ADDR:MASTER_PORT, says its rank, and receives a blob from rank 0 (NCCL's unique id, 128 bytes).
// Every wait has a deadline, so a rank that never comes (or a rank 0 that never listens) ends in a message
// naming the rank(s), not a hang.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lt::dist {

struct Rendezvous {
  std::string master_addr;  // rank 0's host name or address
  int master_port = 0;
  int rank = 0, world_size = 1;
  double timeout_s = 300;  // how long rank 0 waits for all ranks, and the others for rank 0
};

// Rank 0 passes the blob and gets it back once every rank has received it; the others pass {} and get
// rank 0's blob (of the same size on every rank).
std::vector<uint8_t> share_from_rank0(const Rendezvous& r, const std::vector<uint8_t>& blob);

}  // namespace lt::dist
