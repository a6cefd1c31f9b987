#include "dist/tcp_rendezvous.h"

#include <fmt/core.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace lt::dist {
namespace {

using Clock = std::chrono::steady_clock;

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return int(std::max<int64_t>(left, 0));
}

// Waits for `events` on fd until the deadline; false when it passed.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Moves exactly `bytes` (send or receive) before the deadline; false on a closed peer or the deadline.
template <class Io>
bool transfer(int fd, size_t bytes, short events, Clock::time_point deadline, Io io) {
  size_t done = 0;
  while (done < bytes) {
    if (!wait_for(fd, events, deadline)) return false;
    const ssize_t n = io(done, bytes - done);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    done += size_t(n);
  }
  return true;
}

bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  return transfer(fd, bytes, POLLOUT, deadline, [&](size_t at, size_t n) {
    return ::send(fd, static_cast<const char*>(data) + at, n, MSG_NOSIGNAL);
  });
}

bool receive_all(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  return transfer(fd, bytes, POLLIN, deadline,
                  [&](size_t at, size_t n) { return ::recv(fd, static_cast<char*>(data) + at, n, 0); });
}

std::string where(const Rendezvous& r) {
  return fmt::format("{}:{}", r.master_addr, r.master_port);
}

std::vector<uint8_t> serve(const Rendezvous& r, const std::vector<uint8_t>& blob,
                           Clock::time_point deadline) {
  Socket listener(::socket(AF_INET6, SOCK_STREAM, 0));
  const bool v6 = listener.fd() >= 0;
  if (!v6) listener = Socket(::socket(AF_INET, SOCK_STREAM, 0));
  LT_CHECK(listener.fd() >= 0, "rank 0: cannot open a socket: {}", std::strerror(errno));
  const int yes = 1, no = 0;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  int rc;
  if (v6) {
    ::setsockopt(listener.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);  // IPv4 peers too
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(uint16_t(r.master_port));
    rc = ::bind(listener.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    address.sin_port = htons(uint16_t(r.master_port));
    rc = ::bind(listener.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  }
  LT_CHECK(rc == 0 && ::listen(listener.fd(), r.world_size) == 0,
           "rank 0: cannot listen on port {} (MASTER_PORT): {}; choose a free port", r.master_port,
           std::strerror(errno));
  const uint32_t size = uint32_t(blob.size());
  std::vector<bool> served(size_t(r.world_size), false);
  served[0] = true;
  for (int count = 1; count < r.world_size;) {
    if (!wait_for(listener.fd(), POLLIN, deadline)) break;
    Socket peer(::accept(listener.fd(), nullptr, nullptr));
    if (peer.fd() < 0) continue;
    int32_t rank = -1;
    // A stranger that connects and says nothing (or a wrong rank) is dropped, not trusted.
    if (!receive_all(peer.fd(), &rank, sizeof rank, deadline) || rank <= 0 || rank >= r.world_size ||
        served[size_t(rank)])
      continue;
    if (send_all(peer.fd(), &size, sizeof size, deadline) &&
        send_all(peer.fd(), blob.data(), blob.size(), deadline)) {
      served[size_t(rank)] = true;
      ++count;
    }
  }
  std::vector<int> missing;
  for (int i = 1; i < r.world_size; ++i)
    if (!served[size_t(i)]) missing.push_back(i);
  LT_CHECK(
      missing.empty(),
      "rank 0: rank(s) {} of {} did not connect to {} within {} s (they died, or cannot reach this host; "
      "check MASTER_ADDR)",
      fmt::join(missing, ", "), r.world_size, where(r), r.timeout_s);
  return blob;
}

std::vector<uint8_t> fetch(const Rendezvous& r, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(r.master_port);
  const int rc = ::getaddrinfo(r.master_addr.c_str(), port.c_str(), &hints, &found);
  LT_CHECK(rc == 0, "rank {}: MASTER_ADDR '{}' does not resolve: {}", r.rank, r.master_addr,
           gai_strerror(rc));
  std::string last_error = "no answer";
  // Rank 0 may not listen yet: retry until the deadline.
  while (Clock::now() < deadline) {
    for (addrinfo* a = found; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (s.fd() < 0) continue;
      if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      const int32_t rank = r.rank;
      uint32_t size = 0;
      if (!send_all(s.fd(), &rank, sizeof rank, deadline) ||
          !receive_all(s.fd(), &size, sizeof size, deadline)) {
        last_error = "the connection closed before rank 0 answered";
        continue;
      }
      LT_CHECK(size <= (1u << 20), "rank {}: rank 0 at {} sent a {}-byte answer, expected a small id", r.rank,
               where(r), size);
      std::vector<uint8_t> blob(size);
      if (receive_all(s.fd(), blob.data(), size, deadline)) {
        ::freeaddrinfo(found);
        return blob;
      }
      last_error = "the connection closed during rank 0's answer";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::freeaddrinfo(found);
  LT_FAIL(
      "rank {}: could not get the start-up id from rank 0 at {} (MASTER_ADDR:MASTER_PORT) within {} s: {}",
      r.rank, where(r), r.timeout_s, last_error);
}

}  // namespace

std::vector<uint8_t> share_from_rank0(const Rendezvous& r, const std::vector<uint8_t>& blob) {
  LT_CHECK(r.world_size >= 1 && r.rank >= 0 && r.rank < r.world_size, "rendezvous: rank {} of {}", r.rank,
           r.world_size);
  if (r.world_size == 1) return blob;
  LT_CHECK(!r.master_addr.empty() && r.master_port > 0 && r.master_port <= 65535,
           "rank {}: MASTER_ADDR ('{}') and MASTER_PORT ({}) must name rank 0's host and a free port", r.rank,
           r.master_addr, r.master_port);
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(r.timeout_s));
  return r.rank == 0 ? serve(r, blob, deadline) : fetch(r, deadline);
}

}  // namespace lt::dist
