// Checks and conversions between torch's tensors and nnpccl's buffers, shared
// by the process group's collectives and point-to-point calls.
#pragma once

#include <nnpccl.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

namespace nnpccl_torch {

// torch's Python spelling, which is what users wrote.
std::string dtypeName(at::ScalarType type);
nnpccl_datatype_t toNnpccl(at::ScalarType type);
nnpccl_redop_t toNnpccl(const ::c10d::ReduceOp &op);

// Every tensor handed to nnpccl: host memory the library may address as one
// block of elements of a supported type.
nnpccl_datatype_t checkTensor(const at::Tensor &t, const char *what);
const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op);
void checkSameKind(const at::Tensor &t, const at::Tensor &ref, const char *what);
// A list of per-rank tensors, each numel elements of ref's dtype.
void checkList(const std::vector<at::Tensor> &list, size_t expected, const at::Tensor &ref, int64_t numel,
               const char *what);

// The blocks of a list, one after another in a new buffer.
at::Tensor flatten(const std::vector<at::Tensor> &list);
// Copies consecutive blocks of flat (each list[i].numel() elements) into list.
void unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &list);

inline size_t count(const at::Tensor &t) { return static_cast<size_t>(t.numel()); }
inline char *bytes(const at::Tensor &t) { return static_cast<char *>(t.data_ptr()); }

} // namespace nnpccl_torch
