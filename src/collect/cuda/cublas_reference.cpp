#include "cublas_reference.hpp"

#include <array>

#include "cublaslt_api.hpp"
#include "cuda_check.hpp"
#include "driver_api.hpp"
#include "kernel_spec.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // PyTorch's default cuBLAS workspace on Hopper

cudaDataType_t data_type(const std::string& dtype) {
    if (dtype == "float16") return CUDA_R_16F;
    if (dtype == "bfloat16") return CUDA_R_16BF;
    if (dtype == "float32") return CUDA_R_32F;
    if (dtype == "int8") return CUDA_R_8I;
    if (dtype == "int32") return CUDA_R_32I;
    throw core::InputError("dtype", "cuBLAS reference has no " + dtype);
}

}  // namespace

struct CublasReference::Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::string algo_text;
    bool addmm = false;
    bool integer = false;  // int8 x int8 -> int32: int32 scale factors

    ~Plan() {
        if (a) cublaslt().cublasLtMatrixLayoutDestroy(a);
        if (b) cublaslt().cublasLtMatrixLayoutDestroy(b);
        if (c) cublaslt().cublasLtMatrixLayoutDestroy(c);
        if (desc) cublaslt().cublasLtMatmulDescDestroy(desc);
    }
};

CublasReference::CublasReference(CUstream stream) : m_stream(stream) {
    cublasLtHandle_t handle = nullptr;
    CUBLAS_CHECK(cublaslt().cublasLtCreate(&handle));
    m_handle = handle;
    m_workspace_bytes = kWorkspaceBytes;
    CUDA_CHECK(driver().cuMemAlloc(&m_workspace, m_workspace_bytes));
}

CublasReference::~CublasReference() {
    m_plans.clear();
    if (m_workspace) driver().cuMemFree(m_workspace);
    if (m_handle) cublaslt().cublasLtDestroy(static_cast<cublasLtHandle_t>(m_handle));
}

CublasReference::Plan& CublasReference::plan_for(const Problem& p, bool tf32, bool fp32_reduction) {
    const auto& s = p.shape;
    const std::string key = p.op + p.layout + s.M_dtype + (tf32 ? "t" : "") + (fp32_reduction ? "r" : "") +
                            std::to_string(s.B) + "," +
                            std::to_string(s.M) + "," + std::to_string(s.N) + "," + std::to_string(s.K) + "," +
                            std::to_string(s.out_stride[0]) + "," + std::to_string(s.out_stride[1]);
    auto it = m_plans.find(key);
    if (it != m_plans.end()) return *it->second;

    auto plan = std::make_unique<Plan>();
    const cudaDataType_t type = data_type(s.M_dtype);
    const cudaDataType_t out_type = data_type(s.out_dtype);
    // int8: torch._int_mm's cublasLt call, int32 compute and scale factors, int32 C.
    plan->integer = s.M_dtype == "int8";
    const cublasComputeType_t compute =
        plan->integer           ? CUBLAS_COMPUTE_32I
        : s.M_dtype == "float32" ? (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F)
                                 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublaslt().cublasLtMatmulDescCreate(&plan->desc, compute, plan->integer ? CUDA_R_32I : CUDA_R_32F));

    // cuBLAS is column-major: a row-major C[M][N] is a column-major N x M matrix, so
    // C^T = B^T · A^T runs with cuBLAS's "A" = our B and "B" = our A.
    const ProblemStrides st = problem_strides(p);
    const bool b_row_major = p.layout[1] == 'n';  // column-major view of B is B^T (N x K): no transpose
    const bool a_row_major = p.layout[0] == 'n';
    const cublasOperation_t op_first = b_row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t op_second = a_row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    CUBLAS_CHECK(cublaslt().cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
    CUBLAS_CHECK(
        cublaslt().cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
    if (p.op == "addmm") {
        // torch.addmm with a 1-D bias and beta == 1 runs exactly this epilogue.
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        CUBLAS_CHECK(
            cublaslt().cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
        plan->addmm = true;
    }
    // Rows x cols of each operand's column-major view, as stored.
    const std::uint64_t first_rows = b_row_major ? s.N : s.K, first_cols = b_row_major ? s.K : s.N;
    const std::uint64_t second_rows = a_row_major ? s.K : s.M, second_cols = a_row_major ? s.M : s.K;
    CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&plan->a, type, first_rows, first_cols, st.ldb));
    CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&plan->b, type, second_rows, second_cols, st.lda));
    CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutCreate(&plan->c, out_type, s.N, s.M, st.ldc));
    if (s.B > 1) {
        const int batch = static_cast<int>(s.B);
        const std::array<std::pair<cublasLtMatrixLayout_t, std::int64_t>, 3> layouts{
            {{plan->a, st.batch_b}, {plan->b, st.batch_a}, {plan->c, st.batch_c}}};
        for (const auto& [layout, stride] : layouts) {
            CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                          sizeof(batch)));
            CUBLAS_CHECK(cublaslt().cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                          &stride, sizeof(stride)));
        }
    }

    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublaslt().cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = m_workspace_bytes;
    CUBLAS_CHECK(cublaslt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    if (fp32_reduction) {
        // Split-K partial sums rounded to bfloat16 put the reference up to ~1.2x the
        // verification tolerance off the exact product (H200, 584x258x640 split 4 ways).
        const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
        CUBLAS_CHECK(cublaslt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                          sizeof(schemes)));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublaslt().cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(m_handle), plan->desc, plan->a, plan->b,
                                       plan->c, plan->c, pref, 1, &result, &found);
    cublaslt().cublasLtMatmulPreferenceDestroy(pref);
    // cuBLASLt's int8 GEMMs take some layouts and leading dimensions only (an H100 refused
    // 2 of the 4 problems of bench/gpu_int8_profile.sh's collect). One fixed reason, so the
    // summary counts such problems together.
    if (plan->integer && status == CUBLAS_STATUS_NOT_SUPPORTED)
        throw core::Error("cuBLAS", "cuBLASLt has no int8 GEMM for this layout and operand alignment");
    CUBLAS_CHECK(status);
    if (found == 0) throw core::Error("cuBLAS", "no cublasLt algorithm for problem " + key);
    plan->algo = result.algo;
    int algo_id = 0, tile = 0, stages = 0;
    std::size_t written = 0;
    cublaslt().cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof(algo_id), &written);
    cublaslt().cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
    cublaslt().cublasLtMatmulAlgoConfigGetAttribute(&plan->algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages),
                                         &written);
    plan->algo_text = "cublasLt algo " + std::to_string(algo_id) + " tile " + std::to_string(tile) + " stages " +
                      std::to_string(stages);
    auto& ref = *plan;
    m_plans.emplace(key, std::move(plan));
    return ref;
}

void CublasReference::run(const Problem& p, const GemmOperands& ops, bool tf32, bool fp32_reduction) {
    Plan& plan = plan_for(p, tf32, fp32_reduction);
    if (plan.addmm) {
        const void* bias = reinterpret_cast<const void*>(ops.bias);
        CUBLAS_CHECK(
            cublaslt().cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    // Bias epilogue: D = alpha·A·B + bias, which is torch.addmm when beta == 1 (torch
    // itself takes this path only then).
    if (plan.addmm && p.beta != 1.0f)
        throw core::Error("cuBLAS reference", "addmm with beta != 1 is not supported");
    const float alpha = plan.addmm ? p.alpha : 1.0f, beta = 0.0f;
    const std::int32_t int_alpha = 1, int_beta = 0;
    CUBLAS_CHECK(cublaslt().cublasLtMatmul(static_cast<cublasLtHandle_t>(m_handle), plan.desc,
                                plan.integer ? static_cast<const void*>(&int_alpha) : &alpha,
                                reinterpret_cast<const void*>(ops.b), plan.a, reinterpret_cast<const void*>(ops.a),
                                plan.b, plan.integer ? static_cast<const void*>(&int_beta) : &beta,
                                reinterpret_cast<const void*>(ops.c), plan.c,
                                reinterpret_cast<void*>(ops.c), plan.c, &plan.algo,
                                reinterpret_cast<void*>(m_workspace), m_workspace_bytes,
                                reinterpret_cast<cudaStream_t>(m_stream)));
}

std::string CublasReference::algorithm_text(const Problem& problem, bool tf32, bool fp32_reduction) {
    return plan_for(problem, tf32, fp32_reduction).algo_text;
}

}  // namespace mmt::collect::cuda
