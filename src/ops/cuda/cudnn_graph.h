// A cuDNN backend operation graph built by hand: Desc, one cudnnBackendDescriptor_t owned (thin RAII, every
// step checked and traced), and GraphBuilder, which declares tensors by uid and appends matmul / pointwise /
// reduction / reshape operations in order. What the graphs compute is cudnn_attention_graph.cpp's.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ops/cuda/cudnn_library.h"

namespace lt::ops::cuda::cudnn {

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

// The uids below this are the tensors a caller binds (variant pack, cudnn_attention_graph.h's Uid); virtual
// tensors are numbered from here.
constexpr int64_t kFirstVirtual = 100;

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

}  // namespace lt::ops::cuda::cudnn
