// A graceful stop: SIGINT/SIGTERM only set a flag; the trainer finishes the step it is in, writes a
// checkpoint and returns normally (exit code 0), so no signal ever tears a file.
#pragma once

namespace lt::train {

// Installs handlers for SIGINT and SIGTERM that call request_stop(). A second signal while a stop is
// pending restores the default action, so a third Ctrl-C kills a stuck process.
void install_stop_handlers();
void request_stop();
bool stop_requested();
void clear_stop_request();  // a new run in the same process starts without a pending stop

}  // namespace lt::train
