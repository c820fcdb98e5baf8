// The forked NVRTC worker: compiles like the in-process compiler, reports errors the
// same way, and survives nothing it should not (a killed child is reported, not hung on).

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <thread>
#include <vector>

#include "cuda/compile_worker.hpp"
#include "cuda/kernel_source.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

constexpr const char* kUtility = "#define MMT_UTILITY 1\n";

TEST(CudaCompileWorker, CompilesLikeInProcess) {
    auto worker = CompileWorker::spawn(gemm_kernel_source());
    ASSERT_NE(worker, nullptr);
    const CompileResult remote = worker->compile(kUtility, "compute_80");
    const CompileResult local = compile_kernel(kUtility, gemm_kernel_source(), "compute_80");
    ASSERT_TRUE(remote.ok) << remote.log;
    EXPECT_EQ(remote.image, local.image);
    EXPECT_GT(remote.seconds, 0.0);
    // The same process serves the next request.
    const CompileResult broken = worker->compile("#define MMT_BLOCK_M 64\n", "compute_80");
    EXPECT_FALSE(broken.ok);
    EXPECT_FALSE(broken.log.empty());
    EXPECT_TRUE(worker->alive());
}

TEST(CudaCompileWorker, SeveralWorkersCompileAtOnce) {
    std::vector<std::unique_ptr<CompileWorker>> workers;
    for (int i = 0; i < 2; ++i) workers.push_back(CompileWorker::spawn(gemm_kernel_source()));
    std::vector<CompileResult> results(2);
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
        threads.emplace_back([&, i] { results[i] = workers[i]->compile(kUtility, i == 0 ? "compute_80" : "compute_90"); });
    for (auto& t : threads) t.join();
    EXPECT_TRUE(results[0].ok);
    EXPECT_TRUE(results[1].ok);
    EXPECT_NE(results[0].image, results[1].image);  // .target differs
}

TEST(CudaCompileWorker, DeadChildIsReported) {
    auto worker = CompileWorker::spawn(gemm_kernel_source());
    ASSERT_NE(worker, nullptr);
    ASSERT_TRUE(worker->compile(kUtility, "compute_80").ok);
    ASSERT_EQ(::kill(worker->pid(), SIGKILL), 0);
    EXPECT_THROW(worker->compile(kUtility, "compute_80"), core::Error);
    EXPECT_FALSE(worker->alive());
}

TEST(CudaCompileWorker, DestructorReapsTheChild) {
    auto worker = CompileWorker::spawn(gemm_kernel_source());
    ASSERT_NE(worker, nullptr);
    const pid_t pid = worker->pid();
    worker.reset();
    EXPECT_EQ(::kill(pid, 0), -1);  // gone, and reaped (no zombie answers kill 0)
}

}  // namespace
}  // namespace mmt::collect::cuda
