// The kernel cache: memory hits, disk hits across instances (as across processes),
// corrupt entries, compile failures. PTX targets, so no GPU is needed.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

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
