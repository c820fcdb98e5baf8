// The Inductor backend against a fake worker (tests/collect/fake_inductor_worker.py, stdlib
// Python speaking protocol 1): handshake, request and reply translation, the engine's batch
// path, and a worker that fails a config, refuses a problem, crashes, hangs or is
// interrupted. One test measures with the real worker package when torch and a GPU are here.

#include "matmul_toolkit/collect/inductor_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

const std::string kFakeWorker = std::string(MMT_SOURCE_DIR) + "/tests/collect/fake_inductor_worker.py";
const char* const kFakeVariables[] = {"FAKE_FAIL_CONFIG", "FAKE_CRASH_ON_M", "FAKE_HANG_ON_M", "FAKE_ERROR_ON_M",
                                      "FAKE_HELLO_ERROR", "FAKE_PROTOCOL",   "FAKE_LOG"};

Problem make_problem(const std::string& op, std::int64_t m, std::int64_t n, std::int64_t k,
                     const std::string& dtype = "bfloat16", std::int64_t batch = 1) {
    Problem p;
    p.op = op;
    p.shape = core::make_shape(batch, m, n, k, dtype);
    return p;
}

class InductorBackendTest : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char* name : kFakeVariables) ::unsetenv(name);
        clear_interrupt();
        m_dir = fs::temp_directory_path() /
                ("mmt_inductor_test_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    void TearDown() override {
        for (const char* name : kFakeVariables) ::unsetenv(name);
        clear_interrupt();
        fs::remove_all(m_dir);
    }

    static InductorBackendOptions fake(int worker_timeout_s = 900) {
        InductorBackendOptions o;
        o.worker_command = {"python3", kFakeWorker};
        o.worker_timeout_s = worker_timeout_s;
        return o;
    }
    // The given problems, in memory, the fake's own DEFAULT list.
    static CollectOptions run_on(std::vector<Problem> problems) {
        CollectOptions o;
        o.problems = std::move(problems);
        return o;
    }

    fs::path m_dir;
};

std::set<std::string> tiles_of(const core::Dataset& dataset) {
    std::set<std::string> tiles;
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems)
                for (const auto& tc : p.timed_configs) tiles.insert(tc.config.name + " " + describe_config(tc.config));
    return tiles;
}

TEST_F(InductorBackendTest, HandshakeGivesTheHardwareAndTheVersions) {
    auto options = fake();
    options.device_index = 1;
    InductorBackend backend(options);
    EXPECT_EQ(backend.name(), "inductor");
    EXPECT_EQ(backend.hardware_name(), "Fake GPU 1");
    EXPECT_TRUE(backend.measures_in_batches());
    const auto env = backend.environment();
    const std::set<std::pair<std::string, std::string>> found(env.begin(), env.end());
    EXPECT_TRUE(found.count({"python_executable", "python3"}));
    EXPECT_TRUE(found.count({"torch", "2.11.0+fake"}));
    EXPECT_TRUE(found.count({"triton", "3.6.0+fake"}));
    const auto defaults = backend.collection_defaults();
    EXPECT_EQ(defaults.timing.warmup, 1);
    EXPECT_EQ(defaults.timing.repeat, 100);
    EXPECT_EQ(defaults.max_size, 4096);
}

TEST_F(InductorBackendTest, ConfigsModeRoundTripsEveryFieldAndNamesEntriesByOp) {
    InductorBackend backend(fake());
    const Problem problem = make_problem("addmm", 64, 64, 64);
    core::GemmConfig a = specialize_config(default_configs().front(), problem, false);
    a.block_m = a.block_n = a.block_k = 64;
    a.group_m = 4;
    a.num_stages = 2;
    a.num_warps = 4;
    a.even_k = true;
    a.use_fast_accum = true;
    a.acc_type = "tl.float16";
    core::GemmConfig b = a;
    b.block_m = 32;
    b.allow_tf32 = true;
    b.even_k = false;
    backend.prepare(problem, 7);
    const auto entries = backend.measure_batch(problem, {a, b}, "", /*with_reference=*/true, {});

    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(entries[0].config, a);
    EXPECT_EQ(entries[1].config, b);
    EXPECT_EQ(entries[0].config.name, "addmm_config");
    EXPECT_FALSE(entries[0].reference);
    EXPECT_TRUE(entries[2].reference);
    EXPECT_EQ(entries[2].config, reference_config(problem));
    // The fake's time for 64x64 tiles on 64^3, 2 stages: 0.001 + 2.62144e-4 * 1.25 + 2e-4,
    // its runs that time * 1.02, * 1, * 1.05 (rounded to 6 places).
    ASSERT_TRUE(entries[0].timing.has_value());
    EXPECT_DOUBLE_EQ(entries[0].timing->median_ms, 0.001528);  // Inductor's time_ms, its minimum
    EXPECT_DOUBLE_EQ(entries[0].timing->min_ms, 0.001528);
    EXPECT_DOUBLE_EQ(entries[0].timing->max_ms, 0.001604);
    EXPECT_EQ(entries[0].timing->samples_ms.size(), 3u);
    EXPECT_GT(backend.timed_kernel_seconds(), 0.0);

    const Problem bmm = make_problem("bmm", 64, 64, 64, "float16", 2);
    const auto batched = backend.measure_batch(bmm, {specialize_config(a, bmm, false)}, "", false, {});
    ASSERT_EQ(batched.size(), 1u);
    EXPECT_EQ(batched[0].config.name, "bmm_config");
}

TEST_F(InductorBackendTest, InductorsOwnListReplacesTheStaticOneAndIsCounted) {
    InductorBackend backend(fake());
    const auto summary = run_collection(run_on({make_problem("mm", 64, 64, 64)}), backend);
    EXPECT_EQ(summary.problems_collected, 1u);
    EXPECT_EQ(summary.configs_considered, 4u);  // the fake's 3 mm configs and its persistent TMA one
    EXPECT_EQ(summary.configs_timed, 4u);
    EXPECT_EQ(summary.references_timed, 1u);
    EXPECT_TRUE(summary.failed.empty());
    EXPECT_EQ(tiles_of(summary.dataset),
              (std::set<std::string>{"mm_config 32x32x16 g8 s1 w2", "mm_config 128x64x32 g8 s3 w4",
                                     "mm_config 64x128x64 g8 s4 w8", "mm_persistent_tma_config 128x128x64 g8 s3 w8 tma",
                                     "aten_mm aten_mm"}));
}

TEST_F(InductorBackendTest, AFailingConfigIsCountedByCategoryAndTheRestRecorded) {
    ::setenv("FAKE_FAIL_CONFIG", "128:64:32", 1);
    InductorBackend backend(fake());
    const auto summary = run_collection(run_on({make_problem("addmm", 64, 96, 64)}), backend);
    EXPECT_EQ(summary.configs_considered, 3u);
    EXPECT_EQ(summary.configs_timed, 2u);
    EXPECT_EQ(summary.failed, (std::map<std::string, std::size_t>{{"compile failed", 1}}));
    EXPECT_EQ(summary.dataset.num_timings(), 3u);  // two configs and aten_addmm
}

TEST_F(InductorBackendTest, AProblemTheWorkerRefusesFailsAndTheWorkerGoesOn) {
    ::setenv("FAKE_ERROR_ON_M", "64", 1);
    InductorBackend backend(fake());
    const auto summary = run_collection(run_on({make_problem("mm", 64, 64, 64), make_problem("mm", 96, 64, 64)}),
                                        backend);
    EXPECT_EQ(summary.problems_empty, 1u);
    EXPECT_EQ(summary.problems_collected, 1u);
    EXPECT_EQ(summary.failed.at("inductor worker: cannot allocate the operands: fake"), 20u);  // the static DEFAULT list
    EXPECT_EQ(backend.restarts(), 0);
}

TEST_F(InductorBackendTest, AWorkerThatDiesFailsItsProblemAndIsReplaced) {
    ::setenv("FAKE_CRASH_ON_M", "64", 1);
    InductorBackend backend(fake());
    const auto summary = run_collection(run_on({make_problem("mm", 64, 64, 64), make_problem("mm", 96, 64, 64)}),
                                        backend);
    EXPECT_EQ(summary.failed.at("worker died: exited with code 17"), 20u);
    EXPECT_EQ(summary.problems_empty, 1u);
    EXPECT_EQ(summary.problems_collected, 1u);  // measured by the new worker
    EXPECT_EQ(backend.restarts(), 1);
}

TEST_F(InductorBackendTest, AWorkerThatHangsTimesOutAndIsReplaced) {
    ::setenv("FAKE_HANG_ON_M", "64", 1);
    InductorBackend backend(fake(/*worker_timeout_s=*/1));
    const auto start = std::chrono::steady_clock::now();
    const auto summary = run_collection(run_on({make_problem("mm", 64, 64, 64), make_problem("mm", 96, 64, 64)}),
                                        backend);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    EXPECT_EQ(summary.failed.at("worker timed out after 1 s"), 20u);
    EXPECT_EQ(summary.problems_collected, 1u);
    EXPECT_EQ(backend.restarts(), 1);
}

TEST_F(InductorBackendTest, WorkersThatKeepDyingAreGivenUp) {
    ::setenv("FAKE_CRASH_ON_M", "64", 1);
    InductorBackend backend(fake());
    const Problem problem = make_problem("mm", 64, 64, 64);
    for (int i = 0; i <= kInductorMaxRestarts; ++i) {
        EXPECT_THROW(backend.measure_batch(problem, {}, "DEFAULT", true, {}), core::Error);
    }
    try {
        backend.measure_batch(problem, {}, "DEFAULT", true, {});
        FAIL() << "a fifth worker was started";
    } catch (const core::Error& e) {
        EXPECT_NE(std::string(e.what()).find("no new one is started"), std::string::npos) << e.what();
    }
}

TEST_F(InductorBackendTest, AnInterruptKillsTheWorkerAndThrowsInterrupted) {
    ::setenv("FAKE_HANG_ON_M", "64", 1);
    InductorBackend backend(fake());
    std::thread interrupter([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        request_interrupt();
    });
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(backend.measure_batch(make_problem("mm", 64, 64, 64), {}, "DEFAULT", true, {}), core::Interrupted);
    interrupter.join();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(InductorBackendTest, AHelloErrorIsABackendInputError) {
    ::setenv("FAKE_HELLO_ERROR", "1", 1);
    try {
        InductorBackend backend(fake());
        FAIL() << "the worker's error was ignored";
    } catch (const core::InputError& e) {
        EXPECT_EQ(std::string(e.what()), "--backend: inductor: python3: torch is not importable: fake");
    }
}

TEST_F(InductorBackendTest, AnotherProtocolIsRefused) {
    ::setenv("FAKE_PROTOCOL", "2", 1);
    try {
        InductorBackend backend(fake());
        FAIL() << "protocol 2 was accepted";
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("protocol 2"), std::string::npos) << e.what();
    }
}

TEST_F(InductorBackendTest, AWorkerThatCannotStartIsABackendInputError) {
    InductorBackendOptions options;
    options.worker_command = {"/nonexistent/python3"};
    EXPECT_THROW(InductorBackend backend(options), core::InputError);
}

TEST_F(InductorBackendTest, PerConfigTimingIsRefused) {
    InductorBackend backend(fake());
    const Problem problem = make_problem("mm", 64, 64, 64);
    EXPECT_THROW(backend.time(problem, default_configs().front(), {}), core::Error);
    EXPECT_THROW(backend.time_reference(problem, {}), core::Error);
}

TEST_F(InductorBackendTest, TheSidecarRecordsTheWorkersVersions) {
    InductorBackend backend(fake());
    auto options = run_on({make_problem("mm", 64, 64, 64)});
    options.output = m_dir / "d.json";
    run_collection(options, backend);
    const auto meta = core::load_meta_sidecar(m_dir / "d.json");
    EXPECT_EQ(meta["run"]["backend"], "inductor");
    EXPECT_EQ(meta["run"]["statistic"], "min");
    EXPECT_EQ(meta["run"]["environment"]["torch"], "2.11.0+fake");
    EXPECT_EQ(meta["run"]["environment"]["triton"], "3.6.0+fake");
    EXPECT_EQ(meta["run"]["environment"]["python_executable"], "python3");
    // aten_mm on 64^3: the fake's time 0.002 + 2.62144e-4, runs * 1.02, * 1, * 1.05.
    const auto& aten = meta["problems"].begin().value()["aten_mm"];
    EXPECT_DOUBLE_EQ(aten["time_ms"].get<double>(), 0.002262);
    EXPECT_DOUBLE_EQ(aten["median_ms"].get<double>(), 0.002307);
    EXPECT_DOUBLE_EQ(aten["max_ms"].get<double>(), 0.002375);
}

TEST_F(InductorBackendTest, TheRealWorkerMeasuresOneSmallMm) {
    std::string why;
    if (!inductor_python_usable("python3", &why)) GTEST_SKIP() << "python3 has no torch/CUDA: " << why;
    if (find_inductor_package().empty()) GTEST_SKIP() << "no matmul_toolkit_inductor package found";
    InductorBackend backend(InductorBackendOptions{});
    const Problem problem = make_problem("mm", 256, 256, 256);
    backend.prepare(problem, 1);
    const auto entries = backend.measure_batch(problem, {}, "DEFAULT", true, {});
    std::size_t timed = 0, references = 0;
    for (const auto& e : entries) {
        if (e.timing) {
            EXPECT_GT(e.timing->median_ms, 0.0) << describe_config(e.config);
            ++timed;
        }
        if (e.reference) ++references;
    }
    EXPECT_GT(timed, 1u);
    EXPECT_EQ(references, 1u);
}

}  // namespace
}  // namespace mmt::collect
