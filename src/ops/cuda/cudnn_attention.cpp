// cuDNN's fused flash attention through its graph (backend) API, loaded at run time.
//
// cuDNN recognizes a graph of matmul / pointwise / reduction operations as scaled dot-product attention
// and runs it with one fused flash-attention kernel. The graphs below are the ones NVIDIA's cudnn-frontend
// builds for causal (bottom-right) SDPA without dropout or bias, written directly against the
// cudnnBackend* descriptors (thin RAII wrappers of our own; the frontend itself is not used). In cuDNN's
// (b, h, s, d) vocabulary, with our row-major tensors as strided views (no copies):
//   q, out, dout, dq (B, Tq, H, HD)  -> dims (B, H, Tq, HD),  strides (Tq*H*HD, HD, H*HD, 1)
//   k, v (B, S, KVH, HD), first Se = q_offset + Tq rows only (the keys any query sees; see
//   attention_select.h)
//                                   -> dims (B, KVH, Se, HD), strides (S*KVH*HD, HD, KVH*HD, 1); K^T swaps
//                                   the
//                                      last two
//   lse (B, H, Tq) f32              -> cuDNN's softmax "stats" (B, H, Tq, 1): max + log(sum exp) of the
//                                      scaled, masked scores, natural log: exactly our lse, no conversion.
// Forward:  S = Q K^T * scale; mask (row + Se - Tq >= col, else -inf); m = max S; e = exp(S - m);
//           l = sum e; stats = m + log l; P = e / l (bf16); O = P V.
// Backward: ss = sum(dO * O) (non-virtual f32 scratch); P = exp(mask(Q K^T * scale - stats));
//           dV = P^T dO (summed over the heads of a GQA group); dS = P * (dO V^T - ss) * scale;
//           dK = dS^T Q (grouped likewise); dQ = dS K through a non-virtual f32 accumulator (cuDNN adds into
//           it atomically, so dQ's rounding order can vary run to run).
// A chunk's backward (Tq < Se) runs as two calls in masks that cuDNN's fast engine takes (see Mask).
// cuDNN writes dK/dV; ops.h accumulates them, so they go to temporaries that are then added into dk/dv.
// Every scratch buffer (cuDNN's workspace, the f32 row sums and dQ accumulator, the dK/dV temporaries) is
// taken from the stream-ordered pool (cudaMallocAsync on the current stream) and given back before the call
// returns, like the other ops' scratch.
//
// Plans (the finalized execution plan of a shape) are built once per (device, direction, shape) and cached:
// building takes ~0.1-1 s, executing microseconds. One cuDNN handle per device, bound to the current stream
// before every execution.
#include "ops/cuda/cudnn_attention.h"

#include <cudnn_graph.h>  // types and enums only: every function is resolved with dlsym
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/cuda/attention_select.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/device_memory.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/stream.h"

namespace lt::ops::cuda {

namespace {

constexpr int64_t kMinVersion = 91600;  // older releases need workarounds (padding masks) we do not build

// ---- the library ---------------------------------------------------------------------------------------
struct CudnnApi {
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) get_error_string = nullptr;
  decltype(&cudnnGetLastErrorString) get_last_error_string = nullptr;  // optional
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
};

struct Library {
  CudnnApi api;
  CudnnAttentionStatus status;
};

std::mutex g_mutex;                           // handles, plans, and set-stream + execute on a handle
std::map<int, cudnnHandle_t> g_handles;       // per device; live until exit (never destroyed: at static
                                              // destruction the CUDA context may already be gone)
thread_local std::string* t_trace = nullptr;  // the probe's log, when one runs on this thread

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && missing.empty()) missing = name;
  return fn != nullptr;
}

std::string status_text(const CudnnApi& api, cudnnStatus_t st) {
  std::string text = fmt::format("{} ({})", api.get_error_string ? api.get_error_string(st) : "?", int(st));
  if (api.get_last_error_string) {
    char buf[2048] = {0};
    api.get_last_error_string(buf, sizeof(buf));
    if (buf[0]) text += fmt::format(" [{}]", buf);
  }
  return text;
}

Library load_library() {
  Library l;
  const char* env = std::getenv("LT_CUDNN_LIBRARY");
  l.status.library = (env && *env) ? env : "libcudnn.so.9";
  dlerror();
  void* lib = dlopen(l.status.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    l.status.reason = fmt::format(
        "dlopen(\"{}\") failed: {} (install cuDNN 9, put its lib directory on LD_LIBRARY_PATH, or set "
        "LT_CUDNN_LIBRARY to libcudnn.so.9's path)",
        l.status.library, err ? err : "unknown error");
    return l;
  }
  CudnnApi& a = l.api;
  std::string missing;
  resolve(lib, "cudnnGetVersion", a.get_version, missing);
  resolve(lib, "cudnnGetErrorString", a.get_error_string, missing);
  resolve(lib, "cudnnCreate", a.create, missing);
  resolve(lib, "cudnnSetStream", a.set_stream, missing);
  resolve(lib, "cudnnBackendCreateDescriptor", a.create_descriptor, missing);
  resolve(lib, "cudnnBackendDestroyDescriptor", a.destroy_descriptor, missing);
  resolve(lib, "cudnnBackendSetAttribute", a.set_attribute, missing);
  resolve(lib, "cudnnBackendGetAttribute", a.get_attribute, missing);
  resolve(lib, "cudnnBackendFinalize", a.finalize, missing);
  resolve(lib, "cudnnBackendExecute", a.execute, missing);
  std::string optional_missing;
  resolve(lib, "cudnnGetLastErrorString", a.get_last_error_string, optional_missing);
  if (!missing.empty()) {
    l.status.reason = fmt::format("{} has no symbol {}; expected cuDNN 9", l.status.library, missing);
    return l;
  }
  l.status.version = int64_t(a.get_version());
  if (l.status.version < kMinVersion) {
    l.status.reason =
        fmt::format("cuDNN {} found at {}; {} or newer needed (LT_CUDNN_LIBRARY names another)",
                    cudnn_version_name(l.status.version), l.status.library, cudnn_version_name(kMinVersion));
    return l;
  }
  if (device_count() == 0) {
    l.status.reason = "no CUDA device";
    return l;
  }
  int device = 0;
  LT_CUDA_CHECK(cudaGetDevice(&device));
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t st = a.create(&handle);
  if (st != CUDNN_STATUS_SUCCESS) {
    l.status.reason = fmt::format("cudnnCreate failed on device {}: {}", device, status_text(a, st));
    return l;
  }
  g_handles[device] = handle;
  l.status.available = true;
  return l;
}

const Library& library() {
  static const Library lib = [] {
    std::lock_guard<std::mutex> lock(g_mutex);
    return load_library();
  }();
  return lib;
}

const CudnnApi& api() {
  return library().api;
}

void trace(const std::string& line) {
  if (t_trace) *t_trace += line + "\n";
}

// Throws (and logs) a failed step; a successful one is logged unless `quiet` (attribute settings).
void check(cudnnStatus_t st, const std::string& step, bool quiet = false) {
  if (st != CUDNN_STATUS_SUCCESS) {
    const std::string text = status_text(api(), st);
    trace(fmt::format("  FAIL  {}: {}", step, text));
    LT_FAIL("cuDNN attention: {} failed: {}", step, text);
  }
  if (!quiet) trace(fmt::format("  ok    {}", step));
}

// The handle of the current device (created on first use). Call with g_mutex held.
cudnnHandle_t device_handle(int device) {
  auto it = g_handles.find(device);
  if (it != g_handles.end()) return it->second;
  cudnnHandle_t handle = nullptr;
  check(api().create(&handle), fmt::format("cudnnCreate on device {}", device));
  g_handles[device] = handle;
  return handle;
}

// ---- descriptors ---------------------------------------------------------------------------------------
#define LT_ATTR(name) name, #name

// One cudnnBackendDescriptor_t, destroyed with its owner. `name_` prefixes every step of the trace.
class Desc {
 public:
  Desc() = default;
  Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
    check(api().create_descriptor(type, &d_), name_ + ": create", true);
  }
  ~Desc() {
    if (d_) api().destroy_descriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)), name_(std::move(o.name_)) {}
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) api().destroy_descriptor(d_);
      d_ = std::exchange(o.d_, nullptr);
      name_ = std::move(o.name_);
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  Desc& set(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type,
            int64_t count, const void* values) {
    const cudnnStatus_t st = api().set_attribute(d_, attr, type, count, values);
    if (st != CUDNN_STATUS_SUCCESS) check(st, fmt::format("{}: set {}", name_, attr_name));
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t attr, const char* attr_name, const Desc& value) {
    cudnnBackendDescriptor_t raw = value.get();
    return set(attr, attr_name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  Desc& finalize() {
    check(api().finalize(d_), name_ + ": finalize");
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& name() const { return name_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string name_;
};

using Dims = std::array<int64_t, 4>;

// The uids of the tensors the caller binds (variant pack); virtual tensors are numbered from kFirstVirtual.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,
  kNegInf,
  kDiagonalShift,  // Se - Tq (int32): how far the causal diagonal sits right of the top-left one
  kOne,
  kRowSum,   // backward: sum(dO * O) per row, f32 (B, H, Tq)
  kDQAccum,  // backward: dQ in f32, (B, H, Tq, HD) contiguous
  kFirstVirtual = 100,
};

// Builds the operation graph: tensor descriptors by uid and operations in order.
class GraphBuilder {
 public:
  int64_t tensor(const std::string& name, cudnnDataType_t dt, Dims dims, Dims strides, bool is_virtual,
                 int64_t uid = -1, bool by_value = false) {
    if (uid < 0) uid = next_virtual_++;
    Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor " + name);
    const int64_t alignment = 16;
    const bool virt = is_virtual, byval = by_value;
    d.set(LT_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &dt)
        .set(LT_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), CUDNN_TYPE_INT64, 4, dims.data())
        .set(LT_ATTR(CUDNN_ATTR_TENSOR_STRIDES), CUDNN_TYPE_INT64, 4, strides.data())
        .set(LT_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), CUDNN_TYPE_INT64, 1, &uid)
        .set(LT_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), CUDNN_TYPE_INT64, 1, &alignment)
        .set(LT_ATTR(CUDNN_ATTR_TENSOR_IS_VIRTUAL), CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) d.set(LT_ATTR(CUDNN_ATTR_TENSOR_IS_BY_VALUE), CUDNN_TYPE_BOOLEAN, 1, &byval);
    d.finalize();
    tensors_.emplace(uid, std::move(d));
    dims_.emplace(uid, std::make_pair(dims, strides));
    return uid;
  }
  // A scalar passed by value at execution (a host pointer in the variant pack).
  int64_t scalar(const std::string& name, cudnnDataType_t dt, int64_t uid) {
    return tensor(name, dt, {1, 1, 1, 1}, {1, 1, 1, 1}, false, uid, true);
  }
  // A virtual tensor with another's dims and strides.
  int64_t like(const std::string& name, int64_t other, cudnnDataType_t dt) {
    const auto& [dims, strides] = dims_.at(other);
    return tensor(name, dt, dims, strides, true);
  }

  void pointwise(const std::string& name, cudnnPointwiseMode_t mode, cudnnDataType_t math, int64_t x,
                 int64_t b, int64_t t, int64_t y, int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name + " (pointwise descriptor)");
    pw.set(LT_ATTR(CUDNN_ATTR_POINTWISE_MODE), CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(LT_ATTR(CUDNN_ATTR_POINTWISE_MATH_PREC), CUDNN_TYPE_DATA_TYPE, 1, &math);
    if (axis >= 0) pw.set(LT_ATTR(CUDNN_ATTR_POINTWISE_AXIS), CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, name);
    op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), pw)
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_XDESC), tensors_.at(x));
    if (b >= 0) op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_BDESC), tensors_.at(b));
    if (t >= 0) op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_TDESC), tensors_.at(t));
    const float one = 1.0f;  // y = op(alpha1 * x, alpha2 * b): no scaling
    op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_YDESC), tensors_.at(y))
        .set(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1), CUDNN_TYPE_FLOAT, 1, &one)
        .set(LT_ATTR(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2), CUDNN_TYPE_FLOAT, 1, &one)
        .finalize();
    keep_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
  }
  void matmul(const std::string& name, int64_t a, int64_t b, int64_t c) {
    Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name + " (matmul descriptor)");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm.set(LT_ATTR(CUDNN_ATTR_MATMUL_COMP_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &comp).finalize();
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, name);
    op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_ADESC), tensors_.at(a))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_BDESC), tensors_.at(b))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_CDESC), tensors_.at(c))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_MATMUL_DESC), mm)
        .finalize();
    keep_.push_back(std::move(mm));
    ops_.push_back(std::move(op));
  }
  void reduction(const std::string& name, cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name + " (reduction descriptor)");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    red.set(LT_ATTR(CUDNN_ATTR_REDUCTION_OPERATOR), CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode)
        .set(LT_ATTR(CUDNN_ATTR_REDUCTION_COMP_TYPE), CUDNN_TYPE_DATA_TYPE, 1, &comp)
        .finalize();
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, name);
    op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_XDESC), tensors_.at(x))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_YDESC), tensors_.at(y))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_REDUCTION_DESC), red)
        .finalize();
    keep_.push_back(std::move(red));
    ops_.push_back(std::move(op));
  }
  void reshape(const std::string& name, int64_t x, int64_t y) {
    Desc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name);
    op.set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_XDESC), tensors_.at(x))
        .set_desc(LT_ATTR(CUDNN_ATTR_OPERATION_RESHAPE_YDESC), tensors_.at(y))
        .finalize();
    ops_.push_back(std::move(op));
  }

  Desc finalize_graph(cudnnHandle_t handle) {
    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const Desc& op : ops_) raw.push_back(op.get());
    graph.set(LT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
        .set(LT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()),
             raw.data())
        .finalize();
    return graph;
  }

 private:
  int64_t next_virtual_ = kFirstVirtual;
  std::map<int64_t, Desc> tensors_;
  std::map<int64_t, std::pair<Dims, Dims>> dims_;
  std::vector<Desc> keep_;  // pointwise / matmul / reduction descriptors the operations refer to
  std::vector<Desc> ops_;
};

// How a graph masks its scores. A square call (Tq == Se) is causal from the top-left corner; a chunk's call
// (queries at rows [Se - Tq, Se) of the keys) from the bottom-right. How the mask is written decides cuDNN's
// backward engine: the top-left form runs at PyTorch's speed, a shifted diagonal (one pass-by-value
// addition, or the frontend's padding-aware form) at half of it (81 ms against 41.5 ms at 32K on the H200).
// So a chunk's backward runs as two calls in fast forms (cudnn_attention_backward): the earlier keys
// [0, Se - Tq), which every query of the chunk sees (no mask), and the chunk's own keys as a square call.
enum class Mask : uint8_t { TopLeft, Shifted, None };

// The shape of a call in cuDNN's terms.
struct Shape {
  int64_t B, Tq, Se, S, H, KVH, HD;
  Mask mask;
  int64_t dkv_rows;  // rows per batch row of the dK/dV temporaries (the split backward's two calls write
                     // disjoint row ranges of one (B, dkv_rows, KVH, HD) temporary)
  explicit Shape(const AttentionParams& p)
      : B(p.batch),
        Tq(p.q_len),
        Se(cudnn_attention_kv_len(p)),
        S(p.kv_len),
        H(p.heads),
        KVH(p.kv_heads),
        HD(p.head_dim),
        mask(Tq == Se ? Mask::TopLeft : Mask::Shifted),
        dkv_rows(Se) {}
  // The same queries against `rows` keys (the caller offsets the key pointers), masked as `m`.
  Shape keys(int64_t rows, Mask m) const {
    Shape r = *this;
    r.Se = rows;
    r.mask = m;
    return r;
  }
  Dims q_dims() const { return {B, H, Tq, HD}; }
  Dims q_strides() const { return {Tq * H * HD, HD, H * HD, 1}; }
  Dims kt_dims() const { return {B, KVH, HD, Se}; }
  Dims kt_strides() const { return {S * KVH * HD, HD, 1, KVH * HD}; }
  Dims kv_dims() const { return {B, KVH, Se, HD}; }
  Dims kv_strides() const { return {S * KVH * HD, HD, KVH * HD, 1}; }
  Dims row_dims() const { return {B, H, Tq, 1}; }
  Dims row_strides() const { return {H * Tq, Tq, 1, 1}; }
  Dims score_dims() const { return {B, H, Tq, Se}; }
  Dims score_strides() const { return {H * Tq * Se, Tq * Se, Se, 1}; }
  // The transposed scores as the second backward matmuls read them.
  Dims score_t_dims() const { return {B, H, Se, Tq}; }
  Dims score_t_strides() const { return {H * Tq * Se, Tq * Se, 1, Se}; }
  // cuDNN's dK / dV: (B, dkv_rows, KVH, HD) temporaries, rows contiguous.
  Dims dkv_strides() const { return {dkv_rows * KVH * HD, HD, KVH * HD, 1}; }
};

// Keep (row + shift >= col), else -inf: the plain row >= col for TopLeft, shift = Se - Tq for Shifted
// (frontend's diagonal band with a shifted right bound, axis 3). Mask::None returns the scores as they are.
int64_t apply_mask(GraphBuilder& g, int64_t scores, Mask mask) {
  if (mask == Mask::None) return scores;
  const int64_t row = g.like("row index", scores, CUDNN_DATA_INT32);
  g.pointwise("gen_row_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, -1, -1, row, 2);
  const int64_t col = g.like("col index", scores, CUDNN_DATA_INT32);
  g.pointwise("gen_col_index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, scores, -1, -1, col, 3);
  int64_t row_diag = row;
  if (mask == Mask::Shifted) {
    row_diag = g.like("row + shift", scores, CUDNN_DATA_INT32);
    g.pointwise("row+shift", CUDNN_POINTWISE_ADD, CUDNN_DATA_INT32, row, kDiagonalShift, -1, row_diag, 3);
  }
  const int64_t keep = g.like("causal keep", scores, CUDNN_DATA_BOOLEAN);
  g.pointwise("row+shift>=col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row_diag, col, -1, keep);
  const int64_t masked = g.like("masked scores", scores, CUDNN_DATA_FLOAT);
  g.pointwise("causal binary_select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, kNegInf, keep,
              masked);
  return masked;
}

void common_scalars(GraphBuilder& g) {
  g.scalar("attn_scale", CUDNN_DATA_FLOAT, kScale);
  g.scalar("-inf", CUDNN_DATA_FLOAT, kNegInf);
  g.scalar("diagonal shift", CUDNN_DATA_INT32, kDiagonalShift);
}

void build_forward(GraphBuilder& g, const Shape& s) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  g.tensor("Q", bf16, s.q_dims(), s.q_strides(), false, kQ);
  g.tensor("K^T", bf16, s.kt_dims(), s.kt_strides(), false, kK);
  g.tensor("V", bf16, s.kv_dims(), s.kv_strides(), false, kV);
  g.tensor("O", bf16, s.q_dims(), s.q_strides(), false, kO);
  g.tensor("stats", f32, s.row_dims(), s.row_strides(), false, kStats);
  common_scalars(g);

  const int64_t scores = g.tensor("Q K^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("bmm1 Q K^T", kQ, kK, scores);
  const int64_t scaled = g.like("scaled scores", scores, f32);
  g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, f32, scores, kScale, -1, scaled);
  const int64_t masked = apply_mask(g, scaled, s.mask);

  const int64_t max = g.tensor("row max", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const int64_t centered = g.like("scores - max", masked, f32);
  g.pointwise("softmax sub", CUDNN_POINTWISE_SUB, f32, masked, max, -1, centered);
  const int64_t e = g.like("exp", masked, f32);
  g.pointwise("softmax exp", CUDNN_POINTWISE_EXP, f32, centered, -1, -1, e);
  const int64_t sum = g.tensor("row sum exp", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t log_sum = g.tensor("log sum", f32, s.row_dims(), s.row_strides(), true);
  g.pointwise("softmax log", CUDNN_POINTWISE_LOG, f32, sum, -1, -1, log_sum);
  g.pointwise("softmax stats = max + log", CUDNN_POINTWISE_ADD, f32, max, log_sum, -1, kStats);
  const int64_t probs = g.like("P", masked, bf16);  // bmm2 takes P in the I/O dtype
  g.pointwise("softmax div", CUDNN_POINTWISE_DIV, f32, e, sum, -1, probs);
  g.matmul("bmm2 P V", probs, kV, kO);
}

void build_backward(GraphBuilder& g, const Shape& s) {
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  g.tensor("Q", bf16, s.q_dims(), s.q_strides(), false, kQ);
  g.tensor("K^T", bf16, s.kt_dims(), s.kt_strides(), false, kK);
  g.tensor("V^T", bf16, s.kt_dims(), s.kt_strides(), false, kV);
  g.tensor("O", bf16, s.q_dims(), s.q_strides(), false, kO);
  g.tensor("dO", bf16, s.q_dims(), s.q_strides(), false, kDO);
  g.tensor("stats", f32, s.row_dims(), s.row_strides(), false, kStats);
  g.tensor("dQ", bf16, s.q_dims(), s.q_strides(), false, kDQ);
  g.tensor("dK", bf16, s.kv_dims(), s.dkv_strides(), false, kDK);
  g.tensor("dV", bf16, s.kv_dims(), s.dkv_strides(), false, kDV);
  common_scalars(g);
  g.scalar("one", CUDNN_DATA_FLOAT, kOne);
  g.tensor("row sum(dO*O)", f32, s.row_dims(), s.row_strides(), false, kRowSum);
  g.tensor("dQ accumulator", f32, s.q_dims(), {s.H * s.Tq * s.HD, s.Tq * s.HD, s.HD, 1}, false, kDQAccum);

  // softmax_sum = sum_d dO * O
  const int64_t prod =
      g.tensor("dO*O", f32, s.q_dims(), {s.H * s.Tq * s.HD, s.Tq * s.HD, s.H * s.HD, 1}, true);
  g.pointwise("mul dO O", CUDNN_POINTWISE_MUL, f32, kDO, kO, -1, prod);
  const int64_t rowsum = g.tensor("reduce dO*O", f32, s.row_dims(), s.row_strides(), true);
  g.reduction("reduce dO*O", CUDNN_REDUCE_TENSOR_ADD, prod, rowsum);
  g.pointwise("scale_dropout_inv (1)", CUDNN_POINTWISE_MUL, f32, rowsum, kOne, -1, kRowSum);

  // P = exp(mask(Q K^T * scale - stats))
  const int64_t scores = g.tensor("Q K^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("matmul Q K^T", kQ, kK, scores);
  const int64_t scaled = g.like("scaled scores", scores, f32);
  g.pointwise("mul attn_scale", CUDNN_POINTWISE_MUL, f32, scores, kScale, -1, scaled);
  const int64_t centered = g.like("scores - stats", scores, f32);
  g.pointwise("sub stats", CUDNN_POINTWISE_SUB, f32, scaled, kStats, -1, centered);
  const int64_t masked = apply_mask(g, centered, s.mask);
  const int64_t probs = g.like("P", scores, f32);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, f32, masked, -1, -1, probs);

  // dV = P^T dO (for GQA at full heads, then summed over each group's heads)
  const int64_t probs_t = g.tensor("P^T", bf16, s.score_t_dims(), s.score_t_strides(), true);
  g.reshape("reshape P", probs, probs_t);
  const bool grouped = s.H != s.KVH;
  const Dims full_dims{s.B, s.H, s.Se, s.HD}, full_strides{s.H * s.Se * s.HD, s.Se * s.HD, s.HD, 1};
  if (grouped) {
    const int64_t dv_full = g.tensor("dV all heads", bf16, full_dims, full_strides, true);
    g.matmul("matmul P^T dO", probs_t, kDO, dv_full);
    g.reduction("reduce dV heads", CUDNN_REDUCE_TENSOR_ADD, dv_full, kDV);
  } else {
    g.matmul("matmul P^T dO", probs_t, kDO, kDV);
  }

  // dS = P * (dO V^T - softmax_sum) * scale
  const int64_t dp = g.tensor("dO V^T", f32, s.score_dims(), s.score_strides(), true);
  g.matmul("matmul dO V^T", kDO, kV, dp);
  const int64_t dp_centered = g.like("dP - rowsum", dp, f32);
  g.pointwise("sub dP rowsum", CUDNN_POINTWISE_SUB, f32, dp, kRowSum, -1, dp_centered);
  const int64_t ds_unscaled = g.like("dP * P", dp, f32);
  g.pointwise("mul dP P", CUDNN_POINTWISE_MUL, f32, dp_centered, probs, -1, ds_unscaled);
  const int64_t ds = g.like("dS", dp, f32);
  g.pointwise("mul dS attn_scale", CUDNN_POINTWISE_MUL, f32, ds_unscaled, kScale, -1, ds);

  // dK = dS^T Q
  const int64_t ds_t = g.tensor("dS^T", bf16, s.score_t_dims(), s.score_t_strides(), true);
  g.reshape("reshape dS", ds, ds_t);
  if (grouped) {
    const int64_t dk_full = g.tensor("dK all heads", bf16, full_dims, full_strides, true);
    g.matmul("matmul dS^T Q", ds_t, kQ, dk_full);
    g.reduction("reduce dK heads", CUDNN_REDUCE_TENSOR_ADD, dk_full, kDK);
  } else {
    g.matmul("matmul dS^T Q", ds_t, kQ, kDK);
  }

  // dQ = dS K through the f32 accumulator
  const int64_t k_rows = g.tensor("K", bf16, s.kv_dims(), s.kv_strides(), true);
  g.reshape("reshape K", kK, k_rows);
  g.matmul("matmul dS K", ds, k_rows, kDQAccum);
  g.pointwise("identity dQ", CUDNN_POINTWISE_IDENTITY, f32, kDQAccum, -1, -1, kDQ);
}

// ---- plans ---------------------------------------------------------------------------------------------
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

constexpr size_t kMaxCandidates = 6;  // timed on a shape's first call

// LT_CUDNN_SPLIT_BACKWARD=0 runs a chunk's backward as one call with the shifted mask (for measuring the
// split against it).
bool split_backward_enabled() {
  const char* env = std::getenv("LT_CUDNN_SPLIT_BACKWARD");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

bool autotune_enabled() {
  const char* env = std::getenv("LT_CUDNN_AUTOTUNE");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

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

// Builds the graph of `p` and the first engine configuration whose plan finalizes (mode A heuristics, then
// the fallback list). try_all (the probe): finalize every configuration and log each.
std::unique_ptr<Plan> build_plan(const Shape& s, bool backward, cudnnHandle_t handle, bool try_all) {
  static constexpr const char* kMaskNames[] = {"causal top-left", "causal shifted", "no mask"};
  trace(fmt::format("building the {} graph: B={} Tq={} S={} (keys seen {}, {}) H={} KVH={} HD={}",
                    backward ? "backward" : "forward", s.B, s.Tq, s.S, s.Se, kMaskNames[int(s.mask)], s.H,
                    s.KVH, s.HD));
  auto builder = std::make_unique<GraphBuilder>();
  if (backward)
    build_backward(*builder, s);
  else
    build_forward(*builder, s);
  Desc graph = builder->finalize_graph(handle);

  auto chosen = std::make_unique<Plan>();
  std::string failures;
  const size_t wanted = try_all ? size_t(1) << 20 : autotune_enabled() ? kMaxCandidates : 1;
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
  LT_CHECK(!chosen->candidates.empty(), "cuDNN attention: no engine configuration of the {} graph finalized{}",
           backward ? "backward" : "forward",
           failures.empty() ? " (the heuristics returned none)" : failures);
  chosen->builder = std::move(builder);
  chosen->graph = std::move(graph);
  return chosen;
}

using PlanKey =
    std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, Mask, int64_t>;
struct PlanEntry {
  std::unique_ptr<Plan> plan;  // nullptr: building failed
  std::string failure;
};
// Never destroyed: destroying plans at static destruction could run after the CUDA context is gone.
std::map<PlanKey, PlanEntry>& g_plans = *new std::map<PlanKey, PlanEntry>();
CudnnAttentionPlanStats g_plan_stats;

// The cached plan of the call, building it on first use; nullptr (with *why) when it cannot be built.
// Call with g_mutex held.
Plan* find_plan(const Shape& s, bool backward, int device, cudnnHandle_t handle, std::string* why) {
  const PlanKey key{device, backward, s.B, s.Tq, s.Se, s.S, s.H, s.KVH, s.HD, s.mask, s.dkv_rows};
  auto it = g_plans.find(key);
  if (it == g_plans.end()) {
    PlanEntry entry;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      entry.plan = build_plan(s, backward, handle, false);
    } catch (const Error& e) {
      entry.failure = e.what();
    }
    g_plan_stats.plans_built += 1;
    g_plan_stats.build_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    it = g_plans.emplace(key, std::move(entry)).first;
  }
  if (!it->second.plan && why) *why = it->second.failure;
  return it->second.plan.get();
}

size_t round256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// The backward's scratch buffers after cuDNN's workspace: row sums, dQ accumulator, dK and dV temporaries.
std::array<size_t, 4> backward_buffers(const Shape& s) {
  const size_t rows = size_t(s.B * s.H * s.Tq), kv_elems = size_t(s.B * s.Se * s.KVH * s.HD);
  return {rows * sizeof(float), rows * size_t(s.HD) * sizeof(float), kv_elems * 2, kv_elems * 2};
}

// Stream-ordered scratch of one call: cuDNN's workspace and our buffers in one allocation.
class Scratch {
 public:
  Scratch(std::initializer_list<size_t> sizes, cudaStream_t s) : stream_(s) {
    size_t total = 0;
    for (size_t b : sizes) {
      offsets_.push_back(total);
      total += round256(b);
    }
    if (total > 0) LT_CUDA_CHECK(cudaMallocAsync(&base_, total, s));
  }
  ~Scratch() {
    if (base_) cudaFreeAsync(base_, stream_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* at(size_t i) const { return base_ ? static_cast<char*>(base_) + offsets_[i] : nullptr; }

 private:
  cudaStream_t stream_;
  void* base_ = nullptr;
  std::vector<size_t> offsets_;
};

void execute(cudnnHandle_t handle, const Candidate& plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, cudaStream_t stream) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), CUDNN_TYPE_INT64, int64_t(uids.size()), uids.data())
      .set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR, int64_t(pointers.size()),
           pointers.data())
      .set(LT_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  check(api().set_stream(handle, stream), "cudnnSetStream");
  check(api().execute(handle, plan.plan.get(), pack.get()), "cudnnBackendExecute");
  LT_CUDA_CHECK_LAUNCH();
}

// On a shape's first call with several candidate plans: runs each (`run(candidate)` enqueues one execution
// with everything it needs reset) once to warm up and twice timed, and keeps the fastest. The outputs of
// the last timed run are overwritten by the caller's own execution afterwards.
template <class Run>
void autotune(Plan& plan, cudaStream_t stream, Run&& run) {
  if (plan.tuned) return;
  plan.tuned = true;
  if (plan.candidates.size() < 2) return;
  cudaEvent_t start = nullptr, stop = nullptr;
  LT_CUDA_CHECK(cudaEventCreate(&start));
  LT_CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = 0;
  std::string log;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    run(plan.candidates[i]);
    LT_CUDA_CHECK(cudaEventRecord(start, stream));
    run(plan.candidates[i]);
    run(plan.candidates[i]);
    LT_CUDA_CHECK(cudaEventRecord(stop, stream));
    LT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    LT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    log += fmt::format(" engine {} {:.3f} ms;", plan.candidates[i].engine, ms / 2);
    if (i == 0 || ms < best_ms) best_ms = ms, plan.best = i;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  trace(fmt::format("autotune:{} chose engine {}", log, plan.chosen().engine));
  if (std::getenv("LT_CUDNN_AUTOTUNE_LOG"))
    std::fprintf(stderr, "leantune: cuDNN attention autotune:%s chose engine %lld\n", log.c_str(),
                 (long long)plan.chosen().engine);
}

// The scalars a graph's mask does not read are not in its variant pack (cuDNN refuses extra tensors): the
// shift is read by a Shifted mask only, -inf by any mask but None (apply_mask).
void drop_unused_scalars(const Shape& s, std::vector<int64_t>& uids, std::vector<void*>& ptrs) {
  for (size_t i = uids.size(); i-- > 0;) {
    const bool unused = (uids[i] == kDiagonalShift && s.mask != Mask::Shifted) ||
                        (uids[i] == kNegInf && s.mask == Mask::None);
    if (unused) uids.erase(uids.begin() + long(i)), ptrs.erase(ptrs.begin() + long(i));
  }
}

// The handle of the current device and its id; g_mutex must be held.
std::pair<cudnnHandle_t, int> current_handle() {
  int device = 0;
  LT_CUDA_CHECK(cudaGetDevice(&device));
  return {device_handle(device), device};
}

std::atomic<bool> g_deterministic{false};

}  // namespace

const CudnnAttentionStatus& cudnn_attention_status() {
  return library().status;
}

std::string cudnn_attention_status_line() {
  const CudnnAttentionStatus& s = cudnn_attention_status();
  if (s.available)
    return fmt::format("cudnn attention: available (cuDNN {}, {})", cudnn_version_name(s.version), s.library);
  return fmt::format("cudnn attention: unavailable: {}", s.reason);
}

bool cudnn_attention_forward(const AttentionParams& p, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                             std::string* why) {
  LT_CHECK(cudnn_attention_status().available, "cuDNN attention: unavailable: {}",
           cudnn_attention_status().reason);
  const Shape s(p);
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto [handle, device] = current_handle();
  Plan* plan = find_plan(s, false, device, handle, why);
  if (!plan) return false;
  const cudaStream_t stream = current_stream();
  Scratch scratch({size_t(plan->tuned ? plan->chosen().workspace : plan->max_workspace())}, stream);
  float scale = float(p.scale), neg_inf = -INFINITY;
  int32_t shift = int32_t(s.Se - s.Tq);
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale, kNegInf, kDiagonalShift};
  std::vector<void*> ptrs{q.data, k.data, v.data, out.data, lse.data, &scale, &neg_inf, &shift};
  drop_unused_scalars(s, uids, ptrs);
  autotune(*plan, stream, [&](const Candidate& c) { execute(handle, c, uids, ptrs, scratch.at(0), stream); });
  execute(handle, plan->chosen(), uids, ptrs, scratch.at(0), stream);
  return true;
}

bool cudnn_attention_backward(const AttentionParams& p, Tensor dq, Tensor dk, Tensor dv, Tensor dout,
                              Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, std::string* why) {
  LT_CHECK(cudnn_attention_status().available, "cuDNN attention: unavailable: {}",
           cudnn_attention_status().reason);
  const Shape s(p);
  // The calls this backward runs, each with the first key row it starts at. A chunk's backward (Shifted)
  // is split in two calls in the fast mask forms (see Mask): the keys before the chunk, unmasked, and the
  // chunk's own keys, causal from the top-left. Both take the whole softmax's stats (lse) and sum(dO * O),
  // so each computes its keys' part of P and dS exactly. cuDNN's f32 dQ accumulator carries no sum from
  // one execution to the next, and what it holds afterwards is not dQ in the declared layout (measured:
  // adding two calls' accumulators gave wrong dQ), so the first call writes its dQ (bf16) to a temporary,
  // the second to dq, and dq += the temporary.
  struct Part {
    Shape shape;
    int64_t first_key;
    void* dq;  // where its dQ goes
    Plan* plan = nullptr;
  };
  std::vector<Part> parts;
  if (s.mask == Mask::Shifted && s.Tq > 1 && split_backward_enabled()) {
    const int64_t earlier = s.Se - s.Tq;
    parts = {{s.keys(earlier, Mask::None), 0, nullptr}, {s.keys(s.Tq, Mask::TopLeft), earlier, dq.data}};
  } else {
    parts = {{s, 0, dq.data}};
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto [handle, device] = current_handle();
  size_t workspace = 0;
  for (Part& part : parts) {
    part.plan = find_plan(part.shape, true, device, handle, why);
    if (!part.plan) return false;
    workspace = std::max(
        workspace, size_t(part.plan->tuned ? part.plan->chosen().workspace : part.plan->max_workspace()));
  }
  const cudaStream_t stream = current_stream();
  // workspace | row sums (B, H, Tq) f32 | dQ accumulator (B, H, Tq, HD) f32 | dK, dV (B, Se, KVH, HD) bf16
  // | the first call's dQ (B, Tq, H, HD) bf16 (split only)
  const std::array<size_t, 4> buffers = backward_buffers(s);
  Scratch scratch({workspace, buffers[0], buffers[1], buffers[2], buffers[3], parts.size() > 1 ? size_t(dq.numel()) * 2 : 0},
                  stream);
  float scale = float(p.scale), neg_inf = -INFINITY, one = 1.0f;
  int32_t shift = int32_t(s.Se - s.Tq);
  const size_t key_row_bytes = size_t(s.KVH * s.HD) * 2;  // one key row of one batch row, bf16
  auto execute_part = [&](const Part& part, const Candidate& c) {
    const size_t at = size_t(part.first_key) * key_row_bytes;
    std::vector<int64_t> uids{kQ,  kK,     kV,      kO,             kDO,  kStats,  kDQ,     kDK,
                              kDV, kScale, kNegInf, kDiagonalShift, kOne, kRowSum, kDQAccum};
    std::vector<void*> ptrs{q.data,
                            static_cast<char*>(k.data) + at,
                            static_cast<char*>(v.data) + at,
                            out.data,
                            dout.data,
                            lse.data,
                            part.dq ? part.dq : scratch.at(5),
                            static_cast<char*>(scratch.at(3)) + at,
                            static_cast<char*>(scratch.at(4)) + at,
                            &scale,
                            &neg_inf,
                            &shift,
                            &one,
                            scratch.at(1),
                            scratch.at(2)};
    drop_unused_scalars(part.shape, uids, ptrs);
    execute(handle, c, uids, ptrs, scratch.at(0), stream);
  };
  // cuDNN adds dQ into its f32 accumulator: zero it before every execution (the pool's memory is reused). A
  // shape's first call times its candidates (autotune); the real calls follow.
  auto run = [&](const Part& part, const Candidate& c) {
    LT_CUDA_CHECK(cudaMemsetAsync(scratch.at(2), 0, buffers[1], stream));
    execute_part(part, c);
  };
  for (const Part& part : parts)
    autotune(*part.plan, stream, [&](const Candidate& c) { run(part, c); });
  for (const Part& part : parts) run(part, part.plan->chosen());
  if (parts.size() > 1) launch_add_inplace(DType::BF16, dq.data, scratch.at(5), dq.numel(), stream);
  // dk, dv += the temporaries: rows [0, Se) of each batch row (contiguous within a batch row).
  const size_t row_elems = size_t(s.Se * s.KVH * s.HD), stride = size_t(s.S * s.KVH * s.HD);
  for (int64_t b = 0; b < s.B; ++b) {
    const size_t at = size_t(b) * stride * 2, tmp_at = size_t(b) * row_elems * 2;
    launch_add_inplace(DType::BF16, static_cast<char*>(dk.data) + at,
                       static_cast<char*>(scratch.at(3)) + tmp_at, int64_t(row_elems), stream);
    launch_add_inplace(DType::BF16, static_cast<char*>(dv.data) + at,
                       static_cast<char*>(scratch.at(4)) + tmp_at, int64_t(row_elems), stream);
  }
  return true;
}

CudnnAttentionPlanStats cudnn_attention_plan_stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_plan_stats;
}

void cudnn_attention_clear_plans() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_plans.clear();
}

std::string cudnn_attention_probe(const AttentionParams& p, bool backward) {
  std::string log;
  const CudnnAttentionStatus& st = cudnn_attention_status();
  log += cudnn_attention_status_line() + "\n";
  if (!st.available) return log;
  const AttentionCallShape call{DType::BF16, p, false, true, false};
  if (const char* reason = cudnn_attention_ineligible_reason(call))
    log += fmt::format("note: attention_host would not send this call to cuDNN: {}\n", reason);
  std::lock_guard<std::mutex> lock(g_mutex);
  t_trace = &log;
  try {
    const auto [handle, device] = current_handle();
    trace(fmt::format("device {}, handle ready", device));
    build_plan(Shape(p), backward, handle, true);
    trace("probe: a plan was built");
  } catch (const std::exception& e) {
    trace(fmt::format("probe stopped: {}", e.what()));
  }
  t_trace = nullptr;
  return log;
}

void set_attention_deterministic(bool deterministic) {
  g_deterministic.store(deterministic);
}

bool attention_deterministic() {
  if (g_deterministic.load()) return true;
  const char* env = std::getenv("LT_ATTENTION_DETERMINISTIC");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

}  // namespace lt::ops::cuda
