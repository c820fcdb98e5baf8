// The kernel cache: memory hits, disk hits across instances (as across processes),
// corrupt entries, compile failures. PTX targets, so no GPU is needed.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "cuda/kernel_cache.hpp"
#include "cuda/kernel_source.hpp"

namespace mmt::collect::cuda {
namespace {

constexpr const char* kUtility = "#define MMT_UTILITY 1\n";

class CudaKernelCache : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = std::filesystem::temp_directory_path() /
                ("mmt_kernel_cache_test_" + std::to_string(std::random_device{}()));
        std::filesystem::remove_all(m_dir);
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }
    std::filesystem::path m_dir;
};

TEST_F(CudaKernelCache, SecondInstanceReadsDiskAndCompilesNothing) {
    std::string first_image;
    {
        KernelCache cache(gemm_kernel_source(), "compute_80", m_dir, 1);
        const auto k = cache.get(kUtility);
        ASSERT_TRUE(k->ok) << k->log;
        EXPECT_FALSE(k->from_disk);
        EXPECT_NE(k->image.find(".entry mmt_fill_bf16"), std::string::npos);
        first_image = k->image;
        // A second get is a memory hit: no compile, no disk read.
        cache.get(kUtility);
        EXPECT_EQ(cache.stats().compiled, 1u);
        EXPECT_EQ(cache.stats().disk_hits, 0u);
    }
    std::size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(m_dir)) {
        EXPECT_EQ(e.path().extension(), ".ptx");
        ++files;
    }
    EXPECT_EQ(files, 1u);  // no temporary file left behind

    KernelCache again(gemm_kernel_source(), "compute_80", m_dir, 1);
    const auto k = again.get(kUtility);
    ASSERT_TRUE(k->ok);
    EXPECT_TRUE(k->from_disk);
    EXPECT_EQ(k->image, first_image);
    EXPECT_EQ(again.stats().compiled, 0u);
    EXPECT_EQ(again.stats().disk_hits, 1u);
}

TEST_F(CudaKernelCache, KeyIncludesArchAndSource) {
    KernelCache sm80(gemm_kernel_source(), "compute_80", m_dir, 1);
    sm80.get(kUtility);
    KernelCache sm90(gemm_kernel_source(), "compute_90", m_dir, 1);
    sm90.get(kUtility);
    EXPECT_EQ(sm90.stats().compiled, 1u);
    const std::string edited = std::string(gemm_kernel_source()) + "\n// edited\n";
    KernelCache changed(edited, "compute_80", m_dir, 1);
    changed.get(kUtility);
    EXPECT_EQ(changed.stats().compiled, 1u);
}

TEST_F(CudaKernelCache, CorruptEntryIsRecompiled) {
    {
        KernelCache cache(gemm_kernel_source(), "compute_80", m_dir, 1);
        cache.get(kUtility);
    }
    for (const auto& e : std::filesystem::directory_iterator(m_dir)) std::ofstream(e.path()) << "garbage";
    KernelCache cache(gemm_kernel_source(), "compute_80", m_dir, 1);
    const auto k = cache.get(kUtility);
    ASSERT_TRUE(k->ok);
    EXPECT_FALSE(k->from_disk);
    EXPECT_EQ(cache.stats().compiled, 1u);
}

TEST_F(CudaKernelCache, PrefetchCompilesOnWorkers) {
    KernelCache cache(gemm_kernel_source(), "compute_80", {}, 2);
    cache.prefetch(kUtility);
    cache.prefetch(kUtility);  // queued once
    const auto k = cache.get(kUtility);
    ASSERT_TRUE(k->ok);
    EXPECT_EQ(cache.stats().compiled, 1u);
}

std::size_t files_in(const std::filesystem::path& dir) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().extension() == ".ptx";
    return n;
}

// Waits (at most a minute) for the workers to have built `n` kernels.
bool wait_compiled(const KernelCache& cache, std::size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (cache.stats().compiled < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

// Distinct cache keys for the same quick-to-compile utility kernels.
std::string utility(int i) { return std::string(kUtility) + "// plan test " + std::to_string(i) + "\n"; }

TEST_F(CudaKernelCache, PlannedKernelsAreBuiltUnaskedAndLeftOnDisk) {
    // One worker takes the plan in order; the kernel get() already built is not rebuilt.
    KernelCache cache(gemm_kernel_source(), "compute_80", m_dir, 1);
    ASSERT_TRUE(cache.get(utility(1))->ok);
    cache.plan({utility(1), utility(2), utility(3)});
    EXPECT_EQ(cache.stats().planned, 3u);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((files_in(m_dir) < 3 || cache.in_memory() > 1) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(files_in(m_dir), 3u);
    EXPECT_EQ(cache.in_memory(), 1u);  // the kernel get() asked for
    EXPECT_EQ(cache.stats().compiled, 3u);
    // Planned and unasked: dropped from memory once on disk, read back when asked for.
    const auto planned = cache.get(utility(3));
    ASSERT_TRUE(planned->ok);
    EXPECT_TRUE(planned->from_disk);
    // Asked for before the plan: still in memory.
    EXPECT_FALSE(cache.get(utility(1))->from_disk);
    EXPECT_EQ(cache.stats().compiled, 3u);
}

TEST_F(CudaKernelCache, WithoutADiskPlannedKernelsStayInMemory) {
    KernelCache cache(gemm_kernel_source(), "compute_80", {}, 2);
    cache.plan({utility(4), utility(5)});
    ASSERT_TRUE(wait_compiled(cache, 2));
    EXPECT_EQ(cache.in_memory(), 2u);
    const auto k = cache.get(utility(5));
    ASSERT_TRUE(k->ok);
    EXPECT_FALSE(k->from_disk);
    EXPECT_EQ(cache.stats().compiled, 2u);
}

TEST_F(CudaKernelCache, FailedCompileIsCachedAsFailure) {
    KernelCache cache(gemm_kernel_source(), "compute_80", m_dir, 1);
    const auto k = cache.get("#define MMT_BLOCK_M 64\n");  // the other parameters are missing
    EXPECT_FALSE(k->ok);
    EXPECT_FALSE(k->log.empty());
    cache.get("#define MMT_BLOCK_M 64\n");
    EXPECT_EQ(cache.stats().failures, 1u);
    EXPECT_TRUE(std::filesystem::is_empty(m_dir));  // failures are not written to disk
}

TEST_F(CudaKernelCache, DefaultDirFollowsXdg) {
    const char* old = std::getenv("XDG_CACHE_HOME");
    const std::string saved = old ? old : "";
    setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
    EXPECT_EQ(KernelCache::default_disk_dir(), std::filesystem::path("/tmp/xdg-test/matmul_toolkit/kernels"));
    if (old)
        setenv("XDG_CACHE_HOME", saved.c_str(), 1);
    else
        unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace mmt::collect::cuda
