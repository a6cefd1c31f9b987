// A process that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) says so on stderr before it dies, naming
// itself ("rank 1 of 2") and the signal, the faulting address and instruction, and the return addresses of
// its stack as module+offset pairs (`addr2line -e leantune OFFSET` on an unstripped build of the same
// commit turns them into lines); on a stack of its own, so a stack overflow is reported too. Without
// it a crashed rank of a multi-process job leaves an empty log while the others wait out ddp_timeout and
// report only that a collective did not finish. The handler then re-raises the signal with its default
// action, so the exit status and core dump are what they would have been.
#pragma once

#include <string_view>

namespace lt {

// `who` (copied; at most 200 characters are kept) prefixes the report. Safe to call again (the latest
// `who` wins).
void install_crash_report(std::string_view who);

}  // namespace lt
