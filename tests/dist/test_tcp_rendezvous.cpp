// The TCP rendezvous of NCCL's start-up without MPI, with every rank a thread of this process on the
// loopback: every rank receives rank 0's blob; a rank that never comes and a rank 0 that never listens end
// in messages naming them within the timeout.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/tcp_rendezvous.h"
#include "support/test_support.h"

namespace lt::dist {
namespace {

// A port that was free a moment ago (the kernel's pick for port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t length = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpRendezvous, EveryRankGetsRankZerosBlob) {
  const int world = 4, port = free_port();
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = uint8_t(i * 37 + 11);
  std::vector<std::vector<uint8_t>> got(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  // The other ranks start first: they must wait for rank 0 to listen.
  for (int r = world - 1; r >= 0; --r) {
    ranks.emplace_back([&, r] {
      try {
        got[size_t(r)] =
            share_from_rank0({"127.0.0.1", port, r, world, 20.0}, r == 0 ? id : std::vector<uint8_t>{});
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
    if (r == world - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
    EXPECT_EQ(got[size_t(r)], id) << "rank " << r;
  }
}

TEST(TcpRendezvous, RankZeroNamesTheRanksThatNeverCame) {
  const int port = free_port();
  std::string rank1_error;
  std::thread rank1([&] {
    try {
      share_from_rank0({"localhost", port, 1, 3, 10.0}, {});
    } catch (const Error& e) {
      rank1_error = e.what();
    }
  });
  test::expect_error_mentions(
      [&] {
        share_from_rank0({"localhost", port, 0, 3, 1.0}, {1, 2, 3});
      },
      {"rank(s) 2 of 3", "did not connect", "within 1 s"});
  rank1.join();
  EXPECT_EQ(rank1_error, "");  // rank 1 itself was served
}

TEST(TcpRendezvous, ARankWithoutRankZeroStopsAtTheDeadline) {
  const int port = free_port();
  test::expect_error_mentions(
      [&] {
        share_from_rank0({"127.0.0.1", port, 2, 3, 0.5}, {});
      },
      {"rank 2", "from rank 0 at 127.0.0.1:" + std::to_string(port), "within 0.5 s"});
  test::expect_error_mentions(
      [&] {
        share_from_rank0({"", 0, 1, 2, 0.5}, {});
      },
      {"MASTER_ADDR", "MASTER_PORT"});
}

}  // namespace
}  // namespace lt::dist
