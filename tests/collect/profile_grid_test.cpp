// profile's grid: axes, order, names and the int8 rule; run_profile with the CPU backend:
// folders, meta files, traces, resume, another grid in the same folder, Ctrl-C.

#include <gtest/gtest.h>

#include <random>

#include "matmul_toolkit/collect/cpu_backend.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/profile_grid.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

TEST(ProfileGrid, EveryCombinationInAFixedOrder) {
    ProfileAxes axes;
    axes.sizes = {64, 128};
    axes.dtypes = {"float32", "bfloat16"};
    axes.layouts = {"nn", "nt"};
    axes.batch_sizes = {1, 4};
    const auto grid = profile_grid(axes);
    ASSERT_EQ(grid.size(), 16u);
    EXPECT_EQ(grid[0].name, "config_0001");
    EXPECT_EQ(grid[15].name, "config_0016");
    // Sizes innermost, then layouts, dtypes, batch sizes.
    EXPECT_EQ(grid[1].problem.shape.M, 128);
    EXPECT_EQ(grid[2].problem.layout, "nt");
    EXPECT_EQ(grid[4].problem.dtype(), "bfloat16");
    EXPECT_EQ(grid[8].problem.op, "bmm");
    EXPECT_EQ(grid[8].problem.shape.B, 4);
    EXPECT_EQ(grid[0].problem.op, "mm");
    for (const auto& e : grid) EXPECT_TRUE(e.skip_reason.empty()) << e.name;
}

TEST(ProfileGrid, RectangularTakesEverySizeTriple) {
    ProfileAxes axes;
    axes.sizes = {32, 64, 96};
    axes.rectangular = true;
    const auto grid = profile_grid(axes);
    ASSERT_EQ(grid.size(), 27u);
    EXPECT_EQ(grid[1].problem.shape.K, 64);
    EXPECT_EQ(grid[3].problem.shape.N, 64);
    EXPECT_EQ(grid[9].problem.shape.M, 64);
}

TEST(ProfileGrid, Int8IsTorchIntMmOnly) {
    ProfileAxes axes;
    axes.sizes = {16, 64, 100};
    axes.dtypes = {"int8"};
    axes.batch_sizes = {1, 2};
    const auto grid = profile_grid(axes);
    ASSERT_EQ(grid.size(), 6u);
    EXPECT_NE(grid[0].skip_reason.find("M > 16"), std::string::npos);  // 16
    EXPECT_TRUE(grid[1].skip_reason.empty());                           // 64
    EXPECT_NE(grid[2].skip_reason.find("multiples of 8"), std::string::npos);  // 100
    EXPECT_NE(grid[4].skip_reason.find("mm only"), std::string::npos);  // bmm
    EXPECT_EQ(grid[1].problem.shape.out_dtype, "int32");
}

TEST(ProfileGrid, BadAxesNameTheirOption) {
    const auto subject = [](ProfileAxes axes) {
        try {
            profile_grid(axes);
        } catch (const core::InputError& e) {
            return e.subject();
        }
        return std::string("(accepted)");
    };
    ProfileAxes axes;
    axes.sizes = {0};
    EXPECT_EQ(subject(axes), "--sizes");
    axes = {};
    axes.dtypes = {"float64"};
    EXPECT_EQ(subject(axes), "--dtypes");
    axes = {};
    axes.layouts = {"xy"};
    EXPECT_EQ(subject(axes), "--layouts");
    axes = {};
    axes.batch_sizes = {};
    EXPECT_EQ(subject(axes), "--batch-sizes");
}

class ProfileRun : public ::testing::Test {
protected:
    void SetUp() override {
        clear_interrupt();
        m_dir = fs::temp_directory_path() / ("mmt_profile_grid_test_" + std::to_string(std::random_device{}()));
        m_axes.sizes = {48, 64};
        m_axes.dtypes = {"float32", "bfloat16", "int8"};
        m_options.output_dir = m_dir;
        m_options.steps = {1, 1, 2, 1};
    }
    void TearDown() override {
        clear_interrupt();
        fs::remove_all(m_dir);
    }
    core::OrderedJson meta(const std::string& name) const {
        return core::parse_json_text(core::read_file(m_dir / name / "meta.json"), name);
    }

    fs::path m_dir;
    ProfileAxes m_axes;
    ProfileRunOptions m_options;
    CpuBackend m_backend;
};

TEST_F(ProfileRun, WritesAFolderPerExperimentAndResumes) {
    const auto grid = profile_grid(m_axes);
    auto runner = make_backend_runner(m_backend);
    const ProfileSummary first = run_profile(grid, m_options, *runner);
    EXPECT_EQ(first.done, 4u);     // float32 and int8, two sizes each
    EXPECT_EQ(first.skipped, 2u);  // the CPU has no bfloat16 kernel
    EXPECT_EQ(first.failed, 0u);
    EXPECT_FALSE(first.interrupted);

    const auto done = meta("config_0001");
    EXPECT_EQ(done.at("status"), "done");
    EXPECT_EQ(done.at("problem").at("M"), 48);
    EXPECT_EQ(done.at("schedule").at("active"), 2);
    EXPECT_GT(done.at("time_ms").get<double>(), 0.0);
    EXPECT_TRUE(done.at("execution_trace").is_null());
    EXPECT_NE(done.at("execution_trace_unavailable").get<std::string>().find("cpu backend"), std::string::npos);
    ASSERT_EQ(done.at("traces").size(), 1u);
    // The Chrome trace: the timed call and its 2 x 1 runs.
    const auto trace = core::parse_json_text(
        core::read_file(m_dir / "config_0001" / done.at("traces")[0].get<std::string>()), "trace");
    EXPECT_GE(trace.at("traceEvents").size(), 3u);
    const auto skipped = meta("config_0003");
    EXPECT_EQ(skipped.at("status"), "skipped");
    EXPECT_NE(skipped.at("reason").get<std::string>().find("bfloat16"), std::string::npos);
    // int8 on the CPU: no BLAS reference, the first DEFAULT config the backend keeps.
    EXPECT_EQ(meta("config_0005").at("status"), "done");
    EXPECT_NE(meta("config_0005").at("kernel").get<std::string>().find("x"), std::string::npos);
    const std::string csv = core::read_file(first.summary_csv);
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);

    const ProfileSummary second = run_profile(grid, m_options, *runner);
    EXPECT_EQ(second.resumed, 6u);
    EXPECT_EQ(second.done + second.skipped + second.failed, 0u);
    EXPECT_EQ(core::read_file(first.summary_csv), csv);
}

TEST_F(ProfileRun, AnotherGridInTheSameFolderIsRefused) {
    auto runner = make_backend_runner(m_backend);
    run_profile(profile_grid(m_axes), m_options, *runner);
    m_axes.sizes = {32, 64};
    try {
        run_profile(profile_grid(m_axes), m_options, *runner);
        FAIL() << "accepted another grid";
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("holds another experiment"), std::string::npos) << e.what();
    }
}

TEST_F(ProfileRun, AnInterruptStopsBeforeTheNextExperiment) {
    auto runner = make_backend_runner(m_backend);
    request_interrupt();
    const ProfileSummary s = run_profile(profile_grid(m_axes), m_options, *runner);
    EXPECT_TRUE(s.interrupted);
    EXPECT_EQ(s.done + s.skipped, 0u);
    EXPECT_FALSE(fs::exists(m_dir / "config_0001" / "meta.json"));
}

}  // namespace
}  // namespace mmt::collect
