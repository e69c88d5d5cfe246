#include "tensor_checks.hpp"

#include <c10/util/Exception.h>

namespace nnpccl_torch {

namespace {

const char *const kSupportedDtypes =
    "torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, "
    "torch.int32, torch.int64";

const char *redopName(::c10d::ReduceOp::RedOpType op) {
    switch (op) {
    case ::c10d::ReduceOp::BAND: return "BAND";
    case ::c10d::ReduceOp::BOR: return "BOR";
    case ::c10d::ReduceOp::BXOR: return "BXOR";
    case ::c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
    }
}

} // namespace

// torch's Python spelling, which is what users wrote.
std::string dtypeName(at::ScalarType type) {
    switch (type) {
    case at::kBool: return "torch.bool";
    case at::kShort: return "torch.int16";
    case at::kComplexHalf: return "torch.complex32";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(type);
    }
}

nnpccl_datatype_t toNnpccl(at::ScalarType type) {
    switch (type) {
    case at::kFloat: return NNPCCL_FLOAT32;
    case at::kDouble: return NNPCCL_FLOAT64;
    case at::kHalf: return NNPCCL_FLOAT16;
    case at::kBFloat16: return NNPCCL_BFLOAT16;
    case at::kChar: return NNPCCL_INT8;
    case at::kByte: return NNPCCL_UINT8;
    case at::kInt: return NNPCCL_INT32;
    case at::kLong: return NNPCCL_INT64;
    default:
        TORCH_CHECK(false, "nnpccl backend does not support tensors of dtype ", dtypeName(type),
                    " (supported: ", kSupportedDtypes, ")");
    }
}

nnpccl_redop_t toNnpccl(const ::c10d::ReduceOp &op) {
    switch (op.op_) {
    case ::c10d::ReduceOp::SUM: return NNPCCL_SUM;
    case ::c10d::ReduceOp::PRODUCT: return NNPCCL_PROD;
    case ::c10d::ReduceOp::MIN: return NNPCCL_MIN;
    case ::c10d::ReduceOp::MAX: return NNPCCL_MAX;
    case ::c10d::ReduceOp::AVG: return NNPCCL_AVG;
    default:
        TORCH_CHECK(false, "nnpccl backend does not support ReduceOp.", redopName(op.op_),
                    " (supported: SUM, PRODUCT, MIN, MAX, AVG)");
    }
}

// Every tensor handed to nnpccl: host memory the library may address as one
// block of elements of a supported type.
nnpccl_datatype_t checkTensor(const at::Tensor &t, const char *what) {
    TORCH_CHECK(t.defined(), "nnpccl backend: ", what, " is an undefined tensor");
    TORCH_CHECK(t.device().is_cpu(), "nnpccl backend: ", what, " is on device ", t.device().str(),
                "; only CPU tensors are supported");
    TORCH_CHECK(t.layout() == at::kStrided, "nnpccl backend: ", what,
                " is not a dense (strided) tensor; sparse tensors are not supported");
    nnpccl_datatype_t dtype = toNnpccl(t.scalar_type());
    TORCH_CHECK(t.is_contiguous(), "nnpccl backend: ", what, " is not contiguous; pass tensor.contiguous()");
    return dtype;
}

const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op) {
    TORCH_CHECK(tensors.size() == 1, "nnpccl backend: ", op,
                " takes one tensor per process (one device per process), got ", tensors.size());
    return tensors[0];
}

void checkSameKind(const at::Tensor &t, const at::Tensor &ref, const char *what) {
    TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "nnpccl backend: ", what, " has dtype ",
                dtypeName(t.scalar_type()), " but the input has ", dtypeName(ref.scalar_type()));
}

// A list of per-rank tensors, each numel elements of ref's dtype.
void checkList(const std::vector<at::Tensor> &list, size_t expected, const at::Tensor &ref, int64_t numel,
               const char *what) {
    TORCH_CHECK(list.size() == expected, "nnpccl backend: ", what, " must hold ", expected,
                " tensors (one per rank), got ", list.size());
    for (const at::Tensor &t : list) {
        checkTensor(t, what);
        checkSameKind(t, ref, what);
        TORCH_CHECK(t.numel() == numel, "nnpccl backend: every tensor of ", what, " must have ", numel,
                    " elements like the input, one has ", t.numel());
    }
}

// The blocks of a per-rank list, one after another in a new buffer.
at::Tensor flatten(const std::vector<at::Tensor> &list) {
    std::vector<at::Tensor> flat;
    flat.reserve(list.size());
    for (const at::Tensor &t : list) flat.push_back(t.reshape({-1}));
    return at::cat(flat);
}

// Copies block i of flat (numel elements each) into list[i].
void unflatten(const at::Tensor &flat, const std::vector<at::Tensor> &list) {
    int64_t offset = 0;
    for (const at::Tensor &t : list) {
        t.view({-1}).copy_(flat.narrow(0, offset, t.numel()));
        offset += t.numel();
    }
}

} // namespace nnpccl_torch
