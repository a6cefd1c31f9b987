#include "train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace lt::train {

namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop) std::signal(sig, SIG_DFL);
  g_stop = 1;
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}
void request_stop() {
  g_stop = 1;
}
bool stop_requested() {
  return g_stop != 0;
}
void clear_stop_request() {
  g_stop = 0;
}

}  // namespace lt::train
