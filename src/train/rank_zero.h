// What only rank 0 of a multi-process run does, and how the other ranks learn its outcome: writing into
// output_dir (checkpoints, the final model) is rank 0's, and a failure there must stop every rank with its
// message rather than leave them waiting at the next collective.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"

namespace lt::train {

// Rank 0 runs `write`. With one process its exceptions propagate as they are; with several, every rank
// then meets at the agreement step (dist/communicator.h), which throws on every rank an error naming rank 0
// and "writing <what>: <message>" when the write failed, and names a rank that did not arrive within
// `timeout_s`.
void write_on_rank_zero(dist::Communicator& comm, const char* what, const std::function<void()>& write,
                        double timeout_s);

// Every rank must run the same steps over the same tensors, or their collectives stop matching (a hang
// until the timeout, or silently wrong sums). Each rank passes the same named facts (example count, steps,
// trainable elements, ...); a rank whose facts differ from rank 0's stops every rank through the agreement
// step, naming the fact and both values. A no-op with one process.
void check_same_run(dist::Communicator& comm, const std::vector<std::pair<std::string, int64_t>>& facts,
                    double timeout_s);

// Rank 0's `text` on every rank (a collective; with one process, `text` itself). Bytes travel as f64
// values (exact), since the communicators move floating tensors only.
std::string broadcast_text(dist::Communicator& comm, const std::string& text);

// Whether a stop signal (train/stop_signal.h) reached any rank: a signal reaches the ranks at slightly
// different moments, and they must stop after the same step. One all-reduce with several processes.
bool stop_requested_on_any_rank(dist::Communicator& comm);

}  // namespace lt::train
