#include "ops/context.h"

namespace lt::ops {
namespace {
thread_local const Context* g_call_context = nullptr;
}  // namespace

const Context& default_context() {
  static const Context context;
  return context;
}

Context context_with(const KernelOptions& kernels) {
  Context context;
  context.kernels = kernels;
  return context;
}

const Context& call_context() {
  return g_call_context != nullptr ? *g_call_context : default_context();
}

CallScope::CallScope(const Context& context) : previous_(g_call_context) {
  g_call_context = &context;
}

CallScope::~CallScope() {
  g_call_context = previous_;
}

}  // namespace lt::ops
