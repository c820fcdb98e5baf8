// `collect --backend inductor` with a fake worker (tests/collect/fake_inductor_worker.py,
// hidden option --inductor-worker): resume, the sidecar's environment, a worker that
// refuses its hello, and --backend combinations that are refused.

#include <cstdlib>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const std::string kFakeWorker = "python3 " + std::string(MMT_SOURCE_DIR) + "/tests/collect/fake_inductor_worker.py";

class CollectInductor : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fresh_temp_dir("mmt_cli_collect_inductor");
        ::unsetenv("FAKE_HELLO_ERROR");
        ::setenv("FAKE_LOG", (m_dir / "requests.log").c_str(), 1);
    }
    void TearDown() override {
        ::unsetenv("FAKE_LOG");
        ::unsetenv("FAKE_HELLO_ERROR");
        fs::remove_all(m_dir);
    }
    std::vector<std::string> collect_args() const {
        return {"collect", "--backend", "inductor", "--inductor-worker", kFakeWorker, "--num-shapes", "3",
                "--max-size", "128", "--output", (m_dir / "d.json").string()};
    }
    std::size_t requests() const {
        std::ifstream in(m_dir / "requests.log");
        std::size_t lines = 0;
        for (std::string line; std::getline(in, line);) ++lines;
        return lines;
    }

    fs::path m_dir;
};

TEST_F(CollectInductor, CollectsWithTheFakeWorkerAndResumesWithoutMeasuringAgain) {
    const auto first = run_cli(collect_args(), m_dir / "first");
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_NE(first.err.find("backend: inductor (--backend inductor)"), std::string::npos) << first.err;
    EXPECT_EQ(requests(), 3u);
    EXPECT_EQ(core::load_dataset(m_dir / "d.json").num_problems(), 3u);
    EXPECT_NE(first.out.find("3 collected"), std::string::npos) << first.out;

    const auto second = run_cli(collect_args(), m_dir / "second");
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_EQ(requests(), 3u) << "the second run measured again";
    EXPECT_NE(second.out.find("0 collected, 3 already in the output"), std::string::npos) << second.out;
}

TEST_F(CollectInductor, ResumeRefusesAFileTimedAnotherWay) {
    ASSERT_EQ(run_cli(collect_args(), m_dir / "first").exit_code, 0);
    ::setenv("FAKE_TIMING", "other events", 1);
    const auto other = run_cli(collect_args(), m_dir / "other");
    ::unsetenv("FAKE_TIMING");
    EXPECT_EQ(other.exit_code, 2);
    const std::string expected = "\nerror: " + (m_dir / "d.json").string() +
                                 ": was timed by \"fake events\", this run by \"other events\"; choose another "
                                 "--output or move the file away\n";
    EXPECT_TRUE(other.err.size() > expected.size() &&
                other.err.compare(other.err.size() - expected.size(), expected.size(), expected) == 0)
        << other.err;

    // A file from before the worker named its timing: Inductor's benchmarker.
    auto meta = core::load_meta_sidecar(m_dir / "d.json");
    meta["run"]["environment"].erase("timing");
    core::save_meta_sidecar(m_dir / "d.json", meta);
    const auto old = run_cli(collect_args(), m_dir / "old");
    EXPECT_EQ(old.exit_code, 2);
    EXPECT_NE(old.err.find("was timed by \"Inductor's benchmarker\""), std::string::npos) << old.err;

    // A run that names no backend says nothing of its timing either.
    meta["run"].erase("backend");
    core::save_meta_sidecar(m_dir / "d.json", meta);
    const auto unnamed = run_cli(collect_args(), m_dir / "unnamed");
    EXPECT_EQ(unnamed.exit_code, 2);
    EXPECT_NE(unnamed.err.find("was timed by a method it does not record, this run by \"fake events\""),
              std::string::npos)
        << unnamed.err;
    EXPECT_EQ(requests(), 3u) << "a refused resume measured something";
}

TEST_F(CollectInductor, SeveralWorkersShareOneGpuAndItsBenchmarkLock) {
    auto args = collect_args();
    args[6] = "6";  // --num-shapes
    args.insert(args.end(), {"--workers-per-device", "2"});
    const auto result = run_cli(args, m_dir / "two");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(core::load_dataset(m_dir / "d.json").num_problems(), 6u);
    std::ifstream in(m_dir / "requests.log");
    std::set<std::string> pids, locks;
    std::size_t lines = 0;
    for (std::string op, m, n, k, space, pid, lock; in >> op >> m >> n >> k >> space >> pid >> lock; ++lines) {
        pids.insert(pid);
        locks.insert(lock);
    }
    EXPECT_EQ(lines, 6u) << "each problem measured once";
    EXPECT_EQ(pids.size(), 2u) << "two workers on device 0";
    ASSERT_EQ(locks.size(), 1u) << "both workers share one lock";
    EXPECT_NE(locks.begin()->find("-benchmark"), std::string::npos) << *locks.begin();
    EXPECT_FALSE(fs::exists(*locks.begin() + ".gpu0")) << "the lock file outlived the run";
}

TEST_F(CollectInductor, WorkersPerDeviceIsForTheInductorBackendAndAtLeastOne) {
    const auto zero = run_cli({"collect", "--backend", "inductor", "--inductor-worker", kFakeWorker,
                               "--workers-per-device", "0", "--output", (m_dir / "z.json").string()},
                              m_dir / "zero");
    EXPECT_EQ(zero.exit_code, 2);
    EXPECT_EQ(zero.err, "error: --workers-per-device: must be at least 1\n");
    const auto cpu = run_cli({"--device", "cpu", "collect", "--workers-per-device", "2", "--output",
                              (m_dir / "c.json").string()},
                             m_dir / "cpu");
    EXPECT_EQ(cpu.exit_code, 2);
    EXPECT_NE(cpu.err.find("error: --workers-per-device: applies to --backend inductor only"), std::string::npos)
        << cpu.err;
}

TEST_F(CollectInductor, TheSidecarNamesTheBackendAndTheWorkersVersions) {
    const auto result = run_cli(collect_args(), m_dir / "run");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto meta = core::load_meta_sidecar(m_dir / "d.json");
    EXPECT_EQ(meta["run"]["backend"], "inductor");
    EXPECT_EQ(meta["run"]["hardware"], "Fake GPU 0");
    EXPECT_EQ(meta["run"]["environment"]["torch"], "2.11.0+fake");
    EXPECT_EQ(meta["run"]["environment"]["triton"], "3.6.0+fake");
}

TEST_F(CollectInductor, AWorkerThatRefusesItsHelloIsABackendError) {
    ::setenv("FAKE_HELLO_ERROR", "1", 1);
    const auto result = run_cli(collect_args(), m_dir / "run");
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "error: --backend: inductor: python3: torch is not importable: fake\n");
    EXPECT_FALSE(fs::exists(m_dir / "d.json"));
}

TEST_F(CollectInductor, BackendsThatContradictTheDeviceAreRefused) {
    const std::vector<std::vector<std::string>> cases{
        {"--device", "cpu", "collect", "--backend", "inductor"},
        {"--device", "cpu", "collect", "--backend", "native"},
        {"--device", "cuda", "collect", "--backend", "cpu"},
    };
    for (auto args : cases) {
        args.insert(args.end(), {"--num-shapes", "1", "--output", (m_dir / "x.json").string()});
        const auto result = run_cli(args, m_dir / "run");
        EXPECT_EQ(result.exit_code, 2) << args[4] << ": " << result.err;
        EXPECT_EQ(result.err.rfind("error: --backend: " + args[4] + ": ", 0), 0u) << result.err;
        EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    }
}

TEST_F(CollectInductor, NativeNeedsAGpu) {
    if (collect::cuda_device_available()) GTEST_SKIP() << "a CUDA device is present: native is usable";
    const auto result = run_cli({"collect", "--backend", "native", "--num-shapes", "1"}, m_dir / "run");
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: --backend: native: no usable CUDA device", 0), 0u) << result.err;
}

TEST_F(CollectInductor, WithoutAGpuTheDefaultIsTheCpuBackendAndTheLogSaysWhy) {
    if (collect::cuda_device_available()) GTEST_SKIP() << "a CUDA device is present: the default is not cpu";
    const auto result = run_cli({"collect", "--num-shapes", "1", "--max-size", "32", "--quiet", "--output",
                                 (m_dir / "c.json").string()},
                                m_dir / "run");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("backend: cpu (no usable CUDA device)"), std::string::npos) << result.err;
}

TEST_F(CollectInductor, HelpListsBackendButNotTheTestOnlyWorkerOption) {
    const auto result = run_cli({"collect", "--help"}, m_dir / "run");
    EXPECT_NE(result.out.find("--backend"), std::string::npos);
    EXPECT_NE(result.out.find("--worker-timeout"), std::string::npos);
    EXPECT_EQ(result.out.find("--inductor-worker"), std::string::npos);
}

}  // namespace
}  // namespace mmt::testing
