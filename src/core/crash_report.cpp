#include "core/crash_report.h"

#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>

namespace lt {

namespace {

// Filled before any crash: the handler may only call async-signal-safe functions (write, backtrace after
// its first call has loaded what it needs, backtrace_symbols_fd, raise).
char g_who[256] = "leantune";

void write_text(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= size_t(n);
  }
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (invalid memory access)";
    case SIGBUS:
      return "SIGBUS (bus error)";
    case SIGILL:
      return "SIGILL (illegal instruction)";
    case SIGFPE:
      return "SIGFPE (arithmetic error)";
    case SIGABRT:
      return "SIGABRT (aborted)";
    default:
      return "a fatal signal";
  }
}

void on_fatal_signal(int sig) {
  write_text("error: ");
  write_text(g_who);
  write_text(": crashed with ");
  write_text(signal_name(sig));
  write_text("; a leantune bug: please report it with this stack (module(+offset)):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  // SA_RESETHAND restored the default action: the process ends as the signal would have ended it.
  std::raise(sig);
}

}  // namespace

void install_crash_report(std::string_view who) {
  const size_t n = std::min<size_t>(who.size(), 200);
  std::memcpy(g_who, who.data(), n);
  g_who[n] = '\0';
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  struct sigaction action {};
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &action, nullptr);
}

}  // namespace lt
