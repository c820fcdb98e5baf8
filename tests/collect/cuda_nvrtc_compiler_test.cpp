// NVRTC compiles the embedded kernel template to PTX for sm_80 and sm_90 with no GPU:
// every DEFAULT config and a sample of EXHAUSTIVE ones, across every dtype, op and layout.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "cuda/compile_worker.hpp"
#include "cuda/kernel_source.hpp"
#include "cuda/kernel_spec.hpp"
#include "cuda/nvrtc_compiler.hpp"
#include "matmul_toolkit/collect/config_space.hpp"

namespace mmt::collect::cuda {
namespace {

struct Variant {
    std::string dtype;
    bool tf32;
    std::string op;
    std::string layout;
    std::string arch;
};

std::vector<Variant> all_variants() {
    std::vector<Variant> v;
    for (const std::string arch : {"compute_80", "compute_90"})
        for (const auto& [dtype, tf32] : std::vector<std::pair<std::string, bool>>{
                 {"float16", false}, {"bfloat16", false}, {"float32", false}, {"float32", true}})
            for (const std::string op : {"mm", "addmm", "bmm"})
                for (const std::string layout : {"nn", "nt", "tn", "tt"}) v.push_back({dtype, tf32, op, layout, arch});
    return v;
}

// The problem each variant compiles for: aligned sizes for even indices, odd sizes
// (single-element loads, K masks) for odd ones, so both load paths are compiled.
Problem problem_for(const Variant& v, std::size_t index) {
    Problem p;
    p.op = v.op;
    p.layout = v.layout;
    const std::int64_t B = v.op == "bmm" ? 3 : 1;
    p.shape = index % 2 == 0 ? core::make_shape(B, 512, 512, 512, v.dtype) : core::make_shape(B, 333, 257, 391, v.dtype);
    return p;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

// Compiles every job (a .spec and an .arch) on one forked NVRTC process per hardware
// thread (NVRTC serialises compilations inside a process) and returns
// "<kernel> <arch>: <log>" for each job whose result `accept` refuses.
template <typename Job, typename Accept>
std::vector<std::string> compile_all(const std::vector<Job>& jobs, Accept accept) {
    const unsigned threads = std::max(2u, std::thread::hardware_concurrency());
    std::vector<std::unique_ptr<CompileWorker>> processes;
    for (unsigned t = 0; t < threads; ++t) processes.push_back(CompileWorker::spawn(gemm_kernel_source()));
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::vector<std::string> failures;
    const auto worker = [&](CompileWorker* process) {
        for (std::size_t i = next++; i < jobs.size(); i = next++) {
            const auto& job = jobs[i];
            const CompileResult r = process ? process->compile(kernel_prelude(job.spec), job.arch)
                                            : compile_kernel(kernel_prelude(job.spec), gemm_kernel_source(), job.arch);
            if (!accept(job, r)) {
                std::lock_guard<std::mutex> lock(mutex);
                failures.push_back(spec_name(job.spec) + " " + job.arch + ": " + r.log.substr(0, 2000));
            }
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker, processes[t].get());
    for (auto& t : pool) t.join();
    return failures;
}

TEST(CudaNvrtcCompiler, HashIsFnv1a64) {
    EXPECT_EQ(hash_hex(""), "cbf29ce484222325");
    EXPECT_EQ(hash_hex("a"), "af63dc4c8601ec8c");
}

TEST(CudaNvrtcCompiler, ReportsCompileErrorsWithoutThrowing) {
    const CompileResult r = compile_kernel("#define MMT_BLOCK_M 64\n", gemm_kernel_source(), "compute_80");
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.log.empty());
}

TEST(CudaNvrtcCompiler, CompilesDefaultAndSampledExhaustiveConfigsToPtx) {
    const auto variants = all_variants();
    const auto defaults = default_configs();
    auto exhaustive = exhaustive_configs();
    const DeviceLimits h100{232448, 255};

    // Jobs: every DEFAULT config once (for sm_80 and sm_90 in turn) and once as its SPLIT_K
    // variant, and every 120th EXHAUSTIVE config; job j takes variant (j * 7) % 96, so the
    // dtypes, ops, layouts and archs all recur (the asserts below check it) while the whole
    // test stays near 55 compilations.
    struct Job {
        KernelSpec spec;
        std::string arch;
    };
    std::vector<Job> jobs;
    std::set<std::string> seen_dtypes, seen_ops, seen_layouts, seen_archs;
    std::size_t next_job = 0;
    const auto add = [&](core::GemmConfig c, const std::string* arch, bool split_k = false) {
        const std::size_t j = next_job++;
        const Variant& v = variants[(j * 7) % variants.size()];
        const Problem p = problem_for(v, j / 3);
        c.allow_tf32 = v.tf32;
        c.even_k = p.shape.K % c.block_k == 0;
        KernelSpec spec = make_spec(c, p);
        spec.split_k = split_k;
        if (unsupported_reason(spec, h100)) return;
        jobs.push_back({spec, arch ? *arch : v.arch});
        seen_dtypes.insert(v.dtype + (v.tf32 ? "+tf32" : ""));
        seen_ops.insert(v.op);
        seen_layouts.insert(v.layout);
        seen_archs.insert(jobs.back().arch);
    };
    const std::string archs[] = {"compute_80", "compute_90"};
    for (std::size_t i = 0; i < defaults.size(); ++i) add(defaults[i], &archs[i % 2]);
    // The SPLIT_K variant (problems of fewer tiles than SMs) of every DEFAULT config.
    for (const auto& c : defaults) add(c, nullptr, true);
    for (std::size_t i = 0; i < exhaustive.size(); i += 120) add(exhaustive[i], nullptr);
    ASSERT_EQ(seen_dtypes.size(), 4u);
    ASSERT_EQ(seen_ops.size(), 3u);
    ASSERT_EQ(seen_layouts.size(), 4u);
    ASSERT_EQ(seen_archs.size(), 2u);

    const auto failures = compile_all(jobs, [](const Job&, const CompileResult& r) {
        return r.ok && r.image.find(".entry mmt_gemm") != std::string::npos;
    });
    EXPECT_TRUE(failures.empty()) << failures.size() << " of " << jobs.size() << " failed; first: " << failures[0];
    EXPECT_GE(jobs.size(), 40u);
}

TEST(CudaNvrtcCompiler, TensorCorePathsUseMmaAndLdmatrix) {
    core::GemmConfig c;
    c.block_m = 128;
    c.block_n = 128;
    c.block_k = 32;
    c.num_stages = 3;
    c.num_warps = 4;
    Problem p;
    p.shape = core::make_shape(1, 512, 512, 512, "bfloat16");
    const CompileResult bf16 = compile_kernel(kernel_prelude(make_spec(c, p)), gemm_kernel_source(), "compute_90");
    ASSERT_TRUE(bf16.ok) << bf16.log;
    EXPECT_NE(bf16.image.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
    EXPECT_NE(bf16.image.find("ldmatrix.sync.aligned.m8n8.x4"), std::string::npos);
    EXPECT_NE(bf16.image.find("cp.async.cg.shared.global"), std::string::npos);
    p.shape = core::make_shape(1, 512, 512, 512, "float32");
    c.allow_tf32 = true;
    const CompileResult tf32 = compile_kernel(kernel_prelude(make_spec(c, p)), gemm_kernel_source(), "compute_80");
    ASSERT_TRUE(tf32.ok) << tf32.log;
    EXPECT_NE(tf32.image.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
    c.allow_tf32 = false;
    const CompileResult fma = compile_kernel(kernel_prelude(make_spec(c, p)), gemm_kernel_source(), "compute_80");
    ASSERT_TRUE(fma.ok) << fma.log;
    EXPECT_EQ(fma.image.find("mma.sync"), std::string::npos);
    EXPECT_NE(fma.image.find("fma.rn.f32"), std::string::npos);
}

// int8 (torch._int_mm) on the integer MMA path: every config of Inductor's mm and int8 lists
// that int8 admits, each in two of the four layouts (in turn, so that every layout meets
// aligned and odd sizes: byte loads, K masks), with and without the fragment pipeline, for
// sm_80 and sm_90, to PTX that multiplies with m16n8k32 s8 and loads K-major operands with
// ldmatrix; a fifth of them on to a cubin.
TEST(CudaNvrtcCompiler, CompilesInt8KernelsToPtx) {
    const DeviceLimits h100{232448, 255};
    struct Job {
        KernelSpec spec;
        std::string arch;
    };
    std::vector<Job> jobs;
    std::size_t j = 0;
    std::set<std::string> seen;
    auto configs = default_configs();
    for (const auto& c : int8_default_configs()) configs.push_back(c);  // what DEFAULT gives int8
    const std::string layouts[] = {"nn", "nt", "tn", "tt"};
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
        const auto& config = configs[ci];
        // Layouts 0 and 2, then 1 and 3, on aligned sizes; then the same on odd sizes.
        for (const std::string& layout : {layouts[ci % 2], layouts[ci % 2 + 2]}) {
            const std::size_t index = j++;
            Problem p;
            p.op = "mm";
            p.layout = layout;
            const bool odd = (ci / 2) % 2 == 1;
            p.shape = odd ? core::make_shape(1, 333, 257, 391, "int8") : core::make_shape(1, 512, 512, 512, "int8");
            core::GemmConfig c = config;
            c.even_k = p.shape.K % c.block_k == 0;
            KernelSpec spec = make_spec(c, p);
            ASSERT_EQ(spec.math, MathPath::imma);
            if (unsupported_reason(spec, h100)) continue;
            if (index % 3 == 0 && spec.num_stages >= 2) spec.frag_pipeline = !spec.frag_pipeline;
            seen.insert(layout + (spec.frag_pipeline ? "+fp" : "") + (odd ? "+odd" : ""));
            // Every 5th through ptxas as well (a cubin), which checks what PTX lets through.
            const std::string arch = (index / 8) % 2 == 0 ? "80" : "90";
            jobs.push_back({spec, (index % 5 == 0 ? "sm_" : "compute_") + arch});
        }
    }
    EXPECT_GE(jobs.size(), 20u);
    EXPECT_GE(seen.size(), 12u);  // layouts x pipeline x alignment, nearly all combinations
    const auto failures = compile_all(jobs, [](const Job& job, const CompileResult& r) {
        const bool k_major = job.spec.layout[0] == 'n' || job.spec.layout[1] == 't';
        if (job.arch.rfind("sm_", 0) == 0) return r.ok && !r.image.empty();
        return r.ok && r.image.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos &&
               (!k_major || r.image.find("ldmatrix.sync.aligned") != std::string::npos);
    });
    EXPECT_TRUE(failures.empty()) << failures.size() << " of " << jobs.size() << " failed; first: " << failures[0];
}

// The wgmma path (gemm_kernel_sm90.cuh) for sm_90a: every DEFAULT config the wgmma rule
// admits and a sample of EXHAUSTIVE ones, over both 16-bit dtypes, every op and layout,
// to PTX; a few of them through ptxas too (a cubin), which rejects what PTX lets through
// (descriptor operands, accumulator registers the wgmma pipeline would serialise on).
TEST(CudaNvrtcCompiler, CompilesWgmmaKernelsForSm90a) {
    const DeviceLimits h100{232448, 255};
    std::vector<Variant> variants;
    for (const std::string dtype : {"float16", "bfloat16"})
        for (const std::string op : {"mm", "addmm", "bmm"})
            for (const std::string layout : {"nn", "nt", "tn", "tt"}) variants.push_back({dtype, false, op, layout, ""});
    struct Job {
        KernelSpec spec;
        std::string arch;
    };
    std::vector<Job> jobs;
    std::set<std::string> seen_dtypes, seen_ops, seen_layouts, seen_bk, seen_warps;
    std::size_t next_job = 0, defaults_admitted = 0;
    const auto add = [&](const core::GemmConfig& config) {
        // Try variants from the job's own until one admits the config (B row-major needs
        // 64-column warpgroup tiles, which some configs lack).
        for (std::size_t attempt = 0; attempt < variants.size(); ++attempt) {
            const Variant& v = variants[(next_job * 5 + attempt) % variants.size()];
            Problem p;
            p.op = v.op;
            p.layout = v.layout;
            p.shape = core::make_shape(v.op == "bmm" ? 3 : 1, 512, 512, 520, v.dtype);
            KernelSpec spec = make_spec(config, p);
            // Every third job in clusters of two, every third with persistent CTAs (every
            // other of those with dynamic tiles).
            if (!select_wgmma(spec, h100, next_job % 3 == 1 ? 2 : 1, next_job % 3 == 2, next_job % 6 == 5)) continue;
            if (unsupported_reason(spec, h100)) continue;
            const bool cubin = next_job % 8 == 0;
            jobs.push_back({spec, cubin ? "sm_90a" : "compute_90a"});
            ++next_job;
            seen_dtypes.insert(v.dtype);
            seen_ops.insert(v.op);
            seen_layouts.insert(v.layout);
            seen_bk.insert(std::to_string(spec.block_k));
            seen_warps.insert(std::to_string(spec.num_warps) + (spec.wg_m == spec.block_m ? "n" : "m"));
            return true;
        }
        return false;
    };
    for (const auto& c : default_configs()) defaults_admitted += add(c) ? 1 : 0;
    const auto exhaustive = exhaustive_configs();
    std::size_t sampled = 0;
    for (std::size_t i = 0; i < exhaustive.size() && sampled < 24; i += 7) sampled += add(exhaustive[i]) ? 1 : 0;
    ASSERT_GE(defaults_admitted, 8u);
    ASSERT_EQ(seen_dtypes.size(), 2u);
    ASSERT_EQ(seen_ops.size(), 3u);
    ASSERT_EQ(seen_layouts.size(), 4u);
    // K-major swizzles of 32, 64 and 128 bytes, and both two-warpgroup splits.
    EXPECT_TRUE(seen_bk.count("16") && seen_bk.count("32") && seen_bk.count("64")) << seen_bk.size();
    EXPECT_TRUE(seen_warps.count("8m") && seen_warps.count("8n"));
    EXPECT_GE(std::count_if(jobs.begin(), jobs.end(), [](const Job& j) { return j.spec.persistent; }), 6);
    EXPECT_GE(std::count_if(jobs.begin(), jobs.end(), [](const Job& j) { return j.spec.dynamic_tiles; }), 3);

    const auto failures = compile_all(jobs, [](const Job& job, const CompileResult& r) {
        if (!r.ok || r.log.find("warning") != std::string::npos) return false;
        if (job.arch != "compute_90a") return true;
        const std::string& ptx = r.image;
        return ptx.find("wgmma.mma_async.sync.aligned.m64n" + std::to_string(job.spec.wg_n) + "k16.f32") !=
                   std::string::npos &&
               ptx.find("cp.async.bulk.tensor.3d") != std::string::npos &&
               (ptx.find(".multicast::cluster") != std::string::npos) == (job.spec.cluster_m == 2) &&
               (ptx.find("bar.sync 2, 128") != std::string::npos) == job.spec.persistent &&
               // Persistent: the split tail's flag and reduction; dynamic tiles: the ticket too.
               (ptx.find("bar.red.or.pred") != std::string::npos) == job.spec.persistent &&
               occurrences(ptx, "atom.global.add.u32") ==
                   (job.spec.persistent ? 1u : 0u) + (job.spec.dynamic_tiles ? 1u : 0u) &&
               ptx.find("mma.sync") == std::string::npos;
    });
    EXPECT_TRUE(failures.empty()) << failures.size() << " of " << jobs.size() << " failed; first: " << failures[0];
}

}  // namespace
}  // namespace mmt::collect::cuda
