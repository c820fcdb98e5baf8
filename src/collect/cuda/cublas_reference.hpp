#pragma once
/// The vendor reference: cublasLt with the first algorithm its heuristic offers (what
/// PyTorch's aten::mm / addmm / bmm run), on row-major operands in any layout; int8 with
/// int32 compute and output, as torch._int_mm calls it.

#include <cuda.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect::cuda {

/// Device pointers of one problem's operands (bias only for addmm: [N]).
struct GemmOperands {
    CUdeviceptr a = 0;
    CUdeviceptr b = 0;
    CUdeviceptr c = 0;
    CUdeviceptr bias = 0;
};

class CublasReference {
public:
    /// Needs the current context; allocates its workspace.
    explicit CublasReference(CUstream stream);
    ~CublasReference();
    CublasReference(const CublasReference&) = delete;
    CublasReference& operator=(const CublasReference&) = delete;

    /// Enqueues C = A·B (mm, bmm) or C = A·B + bias (addmm) on the stream. float32 uses
    /// TF32 tensor cores only when `tf32`. With `fp32_reduction` a split-K algorithm must
    /// reduce its partial sums in float32 (verification); without, cuBLASLt may reduce them
    /// in the output dtype, as PyTorch lets it by default (the timed baseline).
    void run(const Problem& problem, const GemmOperands& operands, bool tf32, bool fp32_reduction = false);

    /// A name of the algorithm chosen for the problem (for logs).
    std::string algorithm_text(const Problem& problem, bool tf32, bool fp32_reduction = false);

private:
    struct Plan;
    Plan& plan_for(const Problem& problem, bool tf32, bool fp32_reduction);

    CUstream m_stream;
    void* m_handle = nullptr;  // cublasLtHandle_t
    CUdeviceptr m_workspace = 0;
    std::size_t m_workspace_bytes = 0;
    std::map<std::string, std::unique_ptr<Plan>> m_plans;
};

}  // namespace mmt::collect::cuda
