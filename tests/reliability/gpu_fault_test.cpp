// GPU fault isolation on a real device: with MMT_TEST_FAULT_CONFIG the CUDA kernel of one
// config writes through an illegal address (a sticky CUDA_ERROR_ILLEGAL_ADDRESS). `collect`
// must record that config as failed, restart its worker, finish every problem, and the
// configs timed after the fault must time as in a fault-free run (no poisoned context).

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

// A config of the classic template (mma.sync, 4 warps) that DEFAULT lists once.
constexpr const char* kFaultPattern = "64x64x32_s2_w4";

// problem key -> label -> median ms.
std::map<std::string, std::map<std::string, double>> timings(const fs::path& file) {
    std::map<std::string, std::map<std::string, double>> out;
    const auto dataset = core::load_dataset(file);
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems)
                for (const auto& tc : p.timed_configs)
                    out[op.name + core::shape_key(p.shape)][collect::describe_config(tc.config)] = tc.time_ms;
    return out;
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(GpuFaults, AFaultingKernelIsIsolatedAndLaterTimingsAreUnharmed) {
    if (!collect::cuda_device_available()) GTEST_SKIP() << "no CUDA device";
    const fs::path dir = fresh_dir("mmt_gpu_fault");
    // A private kernel cache: the faulting kernel's entry (its own key) stays out of the user's.
    ::setenv("XDG_CACHE_HOME", (dir / "cache").c_str(), 1);
    const auto args = [&](const std::string& output) {
        return std::vector<std::string>{"--device", "cuda", "--seed", "3", "collect", "--num-shapes", "4",
                                        "--min-size", "1024", "--max-size", "2048", "--ops", "mm", "--dtypes",
                                        "bfloat16", "--search-space", "DEFAULT", "--quiet", "--output",
                                        (dir / output).string()};
    };
    ASSERT_EQ(run_child(args("clean.json"), dir / "log_clean"), 0) << Child::slurp_file(dir / "log_clean/stderr.txt");
    ::setenv("MMT_TEST_FAULT_CONFIG", kFaultPattern, 1);
    const int code = run_child(args("faulty.json"), dir / "log_faulty");
    ::unsetenv("MMT_TEST_FAULT_CONFIG");
    const std::string out = Child::slurp_file(dir / "log_faulty/stdout.txt");
    const std::string err = Child::slurp_file(dir / "log_faulty/stderr.txt");
    ASSERT_EQ(code, 0) << out << err;
    std::cout << out;

    const auto clean = timings(dir / "clean.json");
    const auto faulty = timings(dir / "faulty.json");
    ASSERT_EQ(clean.size(), 4u);
    ASSERT_EQ(faulty.size(), clean.size()) << out;
    EXPECT_EQ(count(out, "worker restarted"), 4u) << out;
    EXPECT_NE(out.find("device fault"), std::string::npos) << out;
    EXPECT_NE(out.find("CUDA_ERROR_"), std::string::npos) << out;  // the driver's name for the fault

    std::vector<double> ratios;
    for (const auto& [problem, entries] : clean) {
        ASSERT_TRUE(faulty.count(problem)) << problem;
        const auto& after = faulty.at(problem);
        EXPECT_EQ(after.count("64x64x32 g8 s2 w4"), 0u) << problem;
        EXPECT_EQ(after.size() + 1, entries.size()) << problem << "\n" << out;
        for (const auto& [label, ms] : entries) {
            if (label == "64x64x32 g8 s2 w4") continue;
            ASSERT_TRUE(after.count(label)) << problem << " lost " << label;
            const double ratio = after.at(label) / ms;
            EXPECT_GT(ratio, 0.5) << problem << " " << label;
            EXPECT_LT(ratio, 2.0) << problem << " " << label;
            ratios.push_back(ratio);
        }
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios[ratios.size() / 2];
    std::cout << "faulty/clean time ratio: median " << median << ", min " << ratios.front() << ", max "
              << ratios.back() << " over " << ratios.size() << " entries\n";
    EXPECT_GT(median, 0.9);
    EXPECT_LT(median, 1.1);
    if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace mmt::testing
