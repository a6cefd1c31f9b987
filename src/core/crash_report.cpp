#include "core/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
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

// `value` as 0x... into `out` (at least 19 bytes); async-signal-safe.
const char* hex(uintptr_t value, char* out) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0 && n < 16);
  int k = 0;
  out[k++] = '0';
  out[k++] = 'x';
  while (n > 0) out[k++] = digits[--n];
  out[k] = '\0';
  return out;
}

// The faulting instruction as module+offset (dladdr reads the loaded modules' table, which a crash in our
// code does not touch): printed before the stack, whose unwinding may itself fault on a corrupted stack.
void write_location(void* pc) {
  char buffer[24];
  write_text("  at ");
  write_text(hex(reinterpret_cast<uintptr_t>(pc), buffer));
  Dl_info info{};
  if (pc != nullptr && dladdr(pc, &info) != 0 && info.dli_fname != nullptr) {
    write_text(" = ");
    write_text(info.dli_fname);
    write_text("+");
    write_text(hex(reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase), buffer));
  }
  write_text("\n");
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  write_text("error: ");
  write_text(g_who);
  write_text(": crashed with ");
  write_text(signal_name(sig));
  write_text("; a leantune bug: please report it with these lines\n");
  if (sig == SIGSEGV || sig == SIGBUS) {
    char buffer[24];
    write_text("  address ");
    write_text(hex(reinterpret_cast<uintptr_t>(info->si_addr), buffer));
    write_text("\n");
  }
#if defined(__x86_64__)
  write_location(reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]));
#else
  (void)context;
#endif
  write_text("  stack (module(+offset)):\n");
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
  // Its own stack, so that a stack overflow is reported too.
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(sig, &action, nullptr);
}

}  // namespace lt
