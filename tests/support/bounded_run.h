// Runs a piece of a test in a forked child with a wall-clock limit (alarm) and an address-space limit
// (RLIMIT_AS): a hang or a blow-up on hostile input fails the test instead of stalling or killing the suite.
// The child reports back through a pipe: the lt::Error message it threw, or that it returned.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <new>
#include <string>

#include "core/error.h"

namespace lt::test {

struct BoundedRun {
  bool finished = false;  // the child exited by itself within the limits
  bool threw = false;     // with an lt::Error (message in `message`)
  std::string message;    // the error, or "returned"; on a signal "killed by signal N"
};

// AddressSanitizer reserves terabytes of address space: there the memory cap is left out (the time cap
// stays); the plain build, which CI runs first, keeps both.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCapAddressSpace = false;
#else
constexpr bool kCapAddressSpace = true;
#endif

inline BoundedRun run_bounded(const std::function<void()>& body, unsigned seconds,
                              size_t address_space_bytes = size_t(2) << 30) {
  int fds[2];
  if (::pipe(fds) != 0) return {false, false, "pipe failed"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (kCapAddressSpace) {
      struct rlimit limit {
        address_space_bytes, address_space_bytes
      };
      ::setrlimit(RLIMIT_AS, &limit);
    }
    ::alarm(seconds);
    std::string report;
    try {
      body();
      report = "R returned";
    } catch (const Error& e) {
      report = std::string("E") + e.what();
    } catch (const std::bad_alloc&) {
      report = "X std::bad_alloc";
    } catch (const std::exception& e) {
      report = std::string("X") + e.what();
    }
    const char* p = report.data();
    size_t left = report.size();
    while (left > 0) {
      ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) break;
      p += n, left -= size_t(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BoundedRun r;
  if (WIFSIGNALED(status)) {
    r.message = "killed by signal " + std::to_string(WTERMSIG(status)) +
                (WTERMSIG(status) == SIGALRM ? " (time limit)" : "");
    return r;
  }
  r.finished = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !report.empty();
  r.threw = !report.empty() && report[0] == 'E';
  r.message = report.empty() ? "no report" : report.substr(1);
  return r;
}

}  // namespace lt::test
