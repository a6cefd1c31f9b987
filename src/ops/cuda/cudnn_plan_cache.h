// cuDNN's execution plans of the attention graphs: for each call shape the graph is built once, the engine
// configurations the heuristics offer are finalized (several candidates, timed on the shape's first call by
// autotune), and the plan is cached per (device, direction, shape) in the run's CudnnState (its context's
// GPU handles) for the run's life.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/context.h"
#include "ops/cuda/cudnn_attention_graph.h"
#include "ops/cuda/cudnn_graph.h"

namespace lt::ops::cuda::cudnn {

// One engine configuration whose execution plan finalized.
struct Candidate {
  Desc config;
  Desc plan;
  int64_t workspace = 0;
  int64_t engine = -1;
};

// The finalized plans of one graph, with every descriptor they were made from kept alive as long as they
// (as cudnn-frontend does). Several candidates are timed on the shape's first call (autotune) and the
// fastest kept: the heuristics' first choice is not always the fastest engine for a shape.
struct Plan {
  std::unique_ptr<GraphBuilder> builder;  // tensors and operations
  Desc graph;
  std::vector<Candidate> candidates;  // >= 1
  size_t best = 0;
  bool tuned = false;
  const Candidate& chosen() const { return candidates[best]; }
  int64_t max_workspace() const {
    int64_t w = 0;
    for (const Candidate& c : candidates) w = std::max(w, c.workspace);
    return w;
  }
};

// Builds the graph of `s` and the first engine configuration whose plan finalizes (mode A heuristics, then
// the fallback list). try_all (the probe): finalize every configuration and log each. autotune: the kernel
// option cudnn_autotune (several candidates kept for timing).
std::unique_ptr<Plan> build_plan(const Shape& s, bool backward, cudnnHandle_t handle, bool try_all,
                                 bool autotune);

// A run's cuDNN state on its device (kept in its context's GPU handles): the handle, and the plans built
// with it (cudnn_plan_cache.cpp).
struct CudnnState;
// The state of ctx's run, with its handle made on first use. Call with g_mutex held.
CudnnState& state_of(const Context& ctx);
cudnnHandle_t handle_of(const CudnnState& state);

// The cached plan of the call in `state`, building it on first use; nullptr (with *why) when it cannot be
// built. Call with g_mutex held.
Plan* find_plan(CudnnState& state, const Shape& s, bool backward, int device, bool autotune,
                std::string* why);

}  // namespace lt::ops::cuda::cudnn
