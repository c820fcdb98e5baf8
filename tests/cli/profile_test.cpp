// `profile`: the grid flags on the CPU backend (folders, meta files, traces, summary,
// resume), the Inductor worker's traces through the fake worker (a device without bf16),
// and bad options.

#include <cstdlib>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const std::string kFakeWorker = "python3 " + std::string(MMT_SOURCE_DIR) + "/tests/collect/fake_inductor_worker.py";

class Profile : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_profile"); }
    void TearDown() override {
        ::unsetenv("FAKE_NO_BF16");
        fs::remove_all(m_dir);
    }
    core::OrderedJson meta(const std::string& experiment) const {
        return core::parse_json_text(core::read_file(m_dir / "out" / experiment / "meta.json"), experiment);
    }
    fs::path m_dir;
};

TEST_F(Profile, PrecisionAndLayoutSearchOnTheCpuThenResume) {
    const std::vector<std::string> args{"--device", "cpu", "profile", "--precision-search", "--layout-search",
                                        "--sizes", "64", "--active", "2", "--output-dir", (m_dir / "out").string()};
    const auto first = run_cli(args, m_dir / "first");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    // 4 precisions x 4 layouts; the CPU backend has no float16 / bfloat16 kernel.
    EXPECT_NE(first.out.find("8 done, 8 skipped, 0 failed, 0 finished earlier, of 16 experiments"), std::string::npos)
        << first.out;
    EXPECT_TRUE(fs::is_directory(m_dir / "out" / "config_0016"));
    const auto m = meta("config_0002");
    EXPECT_EQ(m.at("problem").at("layout"), "nt");
    EXPECT_EQ(m.at("status"), "done");
    EXPECT_TRUE(fs::is_regular_file(m_dir / "out" / "config_0002" / m.at("traces")[0].get<std::string>()));
    EXPECT_EQ(meta("config_0005").at("status"), "skipped");  // float16
    EXPECT_EQ(meta("config_0013").at("problem").at("dtype"), "int8");
    EXPECT_EQ(meta("config_0013").at("status"), "done");

    const auto second = run_cli(args, m_dir / "second");
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find("0 done, 0 skipped, 0 failed, 16 finished earlier"), std::string::npos) << second.out;
}

TEST_F(Profile, InductorWorkerTracesAndBf16SkippedWhereTheDeviceHasNone) {
    ::setenv("FAKE_NO_BF16", "1", 1);
    const auto r = run_cli({"profile", "--backend", "inductor", "--inductor-worker", kFakeWorker, "--dtypes", "float16",
                            "bfloat16", "--batch-search", "--sizes", "32", "--output-dir", (m_dir / "out").string()},
                           m_dir / "run");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // 5 batch sizes x 2 dtypes.
    EXPECT_NE(r.out.find("5 done, 5 skipped, 0 failed"), std::string::npos) << r.out;
    const auto done = meta("config_0001");
    EXPECT_EQ(done.at("backend"), "inductor");
    EXPECT_EQ(done.at("hardware"), "Fake GPU 0");
    EXPECT_EQ(done.at("versions").at("torch"), "2.11.0+fake");
    EXPECT_EQ(done.at("execution_trace"), "CPU_trace.json");
    EXPECT_TRUE(fs::is_regular_file(m_dir / "out" / "config_0001" / "fake_host.pt.trace.json"));
    EXPECT_TRUE(fs::is_regular_file(m_dir / "out" / "config_0001" / "CPU_trace.json"));
    EXPECT_EQ(meta("config_0003").at("problem").at("op"), "bmm");
    const auto skipped = meta("config_0006");
    EXPECT_EQ(skipped.at("problem").at("dtype"), "bfloat16");
    EXPECT_EQ(skipped.at("status"), "skipped");
    EXPECT_NE(skipped.at("reason").get<std::string>().find("bfloat16"), std::string::npos);
}

TEST_F(Profile, BadOptionsAreOneClearLine) {
    const auto out = (m_dir / "out").string();
    auto r = run_cli({"--device", "cpu", "profile", "--active", "0", "--output-dir", out}, m_dir / "a");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "error: --active: must be at least 1\n");
    r = run_cli({"--device", "cpu", "profile", "--sizes", "0", "--output-dir", out}, m_dir / "b");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: --sizes: "), std::string::npos) << r.err;
    r = run_cli({"--device", "cpu", "profile", "--dtypes", "float64", "--output-dir", out}, m_dir / "c");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: --dtypes: unknown dtype 'float64'"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(m_dir / "out" / "config_0001"));
}

}  // namespace
}  // namespace mmt::testing
