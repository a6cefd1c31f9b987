// A crashing process names itself and the signal on stderr, shows its stack, and still ends by the signal
// (core/crash_report.h). Run in a forked child whose stderr is a pipe.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "core/crash_report.h"

namespace lt {
namespace {

// What the child wrote to stderr and how it ended, after it installed the report and crashed with `sig`.
std::pair<std::string, int> crash_child(int sig) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    install_crash_report("rank 3 of 4 (local rank 1, launched by torchrun)");
    if (sig == SIGSEGV) {
      volatile int* nowhere = nullptr;
      *nowhere = 1;  // a real invalid access, not a raise()
    }
    std::raise(sig);
    _exit(0);  // not reached
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {out, status};
}

TEST(CrashReport, NamesTheRankAndTheSignalAndEndsByIt) {
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE}) {
    SCOPED_TRACE(sig);
    const auto [out, status] = crash_child(sig);
    EXPECT_NE(out.find("error: rank 3 of 4 (local rank 1, launched by torchrun): crashed with SIG"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("+0x"), std::string::npos) << "no stack frames: " << out;  // module(+offset)
    EXPECT_NE(out.find("  at 0x"), std::string::npos) << "no faulting instruction: " << out;
    if (sig == SIGSEGV) {
      EXPECT_NE(out.find("  address 0x0\n"), std::string::npos) << out;  // the null write
    }
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), sig);
  }
}

}  // namespace
}  // namespace lt
