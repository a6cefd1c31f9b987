// The plan cache of the cuDNN attention backend (cudnn_plan_cache.h): heuristics, plan finalization and the
// cache. Plans (the finalized execution plan of a shape) are built once per run and (device, direction,
// shape): building takes ~0.1-1 s, executing microseconds.
#include "ops/cuda/cudnn_plan_cache.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "ops/cuda/gpu_handles.h"

namespace lt::ops::cuda {

namespace cudnn {

namespace {

constexpr size_t kMaxCandidates = 6;  // timed on a shape's first call

int64_t engine_index(const Desc& cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0, index = -1;
  if (api().get_attribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                          &raw) != CUDNN_STATUS_SUCCESS)
    return -1;
  if (api().get_attribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

// The engine configurations of one heuristics mode, in order: each plan is finalized and kept until
// `wanted` have (try_all: every one, logged). Returns true when `wanted` candidates were found.
bool try_plans(const Desc& graph, cudnnBackendHeurMode_t mode, const char* mode_name, cudnnHandle_t handle,
               bool try_all, size_t wanted, Plan& out, std::string& failures) {
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
  heur.set_desc(LT_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), graph)
      .set(LT_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, 1, &mode)
      .finalize();
  int64_t count = 0;
  check(api().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                            &count, nullptr),
        fmt::format("{}: count results", mode_name));
  trace(fmt::format("  {}: {} engine configuration(s)", mode_name, count));
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, fmt::format("{} config {}", mode_name, i));
    raw.push_back(cfgs.back().get());
  }
  int64_t got = 0;
  if (count > 0)
    check(api().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                              &got, raw.data()),
          fmt::format("{}: get results", mode_name));
  for (int64_t i = 0; i < got; ++i) {
    const int64_t engine = engine_index(cfgs[size_t(i)]);
    Candidate c;
    c.engine = engine;
    c.plan = Desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, fmt::format("plan of engine {}", engine));
    c.plan.set(LT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
        .set_desc(LT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), cfgs[size_t(i)]);
    const cudnnStatus_t st = api().finalize(c.plan.get());
    if (st != CUDNN_STATUS_SUCCESS) {
      const std::string text = status_text(api(), st);
      trace(fmt::format("  no    {} config {} (engine {}): plan finalize: {}", mode_name, i, engine, text));
      failures += fmt::format("; engine {}: {}", engine, text);
      continue;
    }
    int64_t n = 0;
    check(api().get_attribute(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                              &c.workspace),
          "plan: get workspace size");
    trace(fmt::format("  ok    {} config {} (engine {}): plan finalized, workspace {} bytes", mode_name, i,
                      engine, c.workspace));
    c.config = std::move(cfgs[size_t(i)]);
    if (out.candidates.size() < wanted) out.candidates.push_back(std::move(c));
    if (!try_all && out.candidates.size() >= wanted) return true;
  }
  return false;
}

using PlanKey =
    std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, Mask, bool, int64_t>;
struct PlanEntry {
  std::unique_ptr<Plan> plan;  // nullptr: building failed
  std::string failure;
};
CudnnAttentionPlanStats g_plan_stats;

}  // namespace

struct CudnnState {
  cudnnHandle_t handle = nullptr;
  std::map<PlanKey, PlanEntry> plans;
  ~CudnnState() {
    plans.clear();  // the plans' descriptors before the handle they were made with
    if (handle) api().destroy(handle);
  }
};

CudnnState& state_of(const Context& ctx) {
  std::shared_ptr<void>& slot = gpu_handles(ctx).cudnn();
  if (!slot) {
    auto state = std::make_shared<CudnnState>();
    check(api().create(&state->handle), fmt::format("cudnnCreate on device {}", ctx.device));
    slot = state;
  }
  return *static_cast<CudnnState*>(slot.get());
}

cudnnHandle_t handle_of(const CudnnState& state) {
  return state.handle;
}

std::unique_ptr<Plan> build_plan(const Shape& s, bool backward, cudnnHandle_t handle, bool try_all,
                                 bool autotune) {
  static constexpr const char* kMaskNames[] = {"causal top-left", "causal shifted", "no mask"};
  trace(fmt::format("building the {} graph: B={} Tq={} S={} (keys seen {}, {}{}) H={} KVH={} HD={}",
                    backward ? "backward" : "forward", s.B, s.Tq, s.S, s.Se, kMaskNames[int(s.mask)],
                    s.alibi ? ", ALiBi" : "", s.H, s.KVH, s.HD));
  auto builder = std::make_unique<GraphBuilder>();
  if (backward)
    build_backward(*builder, s);
  else
    build_forward(*builder, s);
  Desc graph = builder->finalize_graph(handle);

  auto chosen = std::make_unique<Plan>();
  std::string failures;
  const size_t wanted = try_all ? size_t(1) << 20 : autotune ? kMaxCandidates : 1;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics mode A" : "heuristics fallback";
    // A mode that fails as a whole (no engine supports the graph) leaves the other to try; the fallback
    // list is only for a graph mode A found no plan for.
    try {
      if (try_plans(graph, mode, mode_name, handle, try_all, wanted, *chosen, failures)) break;
    } catch (const Error& e) {
      failures += fmt::format("; {}: {}", mode_name, e.what());
    }
    if (!chosen->candidates.empty() && !try_all) break;
  }
  LT_CHECK(
      !chosen->candidates.empty(), "cuDNN attention: no engine configuration of the {} graph finalized{}",
      backward ? "backward" : "forward", failures.empty() ? " (the heuristics returned none)" : failures);
  chosen->builder = std::move(builder);
  chosen->graph = std::move(graph);
  return chosen;
}

Plan* find_plan(CudnnState& state, const Shape& s, bool backward, int device, bool autotune,
                std::string* why) {
  const PlanKey key{device, backward, s.B, s.Tq, s.Se, s.S, s.H, s.KVH, s.HD, s.mask, s.alibi, s.dkv_rows};
  auto it = state.plans.find(key);
  if (it == state.plans.end()) {
    PlanEntry entry;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      entry.plan = build_plan(s, backward, state.handle, false, autotune);
    } catch (const Error& e) {
      entry.failure = e.what();
    }
    g_plan_stats.plans_built += 1;
    g_plan_stats.build_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    it = state.plans.emplace(key, std::move(entry)).first;
  }
  if (!it->second.plan && why) *why = it->second.failure;
  return it->second.plan.get();
}

}  // namespace cudnn

CudnnAttentionPlanStats cudnn_attention_plan_stats() {
  std::lock_guard<std::mutex> lock(cudnn::g_mutex);
  return cudnn::g_plan_stats;
}

void cudnn_attention_clear_plans(const Context& ctx) {
  std::lock_guard<std::mutex> lock(cudnn::g_mutex);
  cudnn::state_of(ctx).plans.clear();
}

}  // namespace lt::ops::cuda
