// The collection engine on the CPU backend: what it records, chunked files, resume,
// interrupts, traces, config files, and bad input caught before any work.

#include "matmul_toolkit/collect/engine.hpp"

#include <cstdlib>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/cpu_backend.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

class Engine : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() /
                ("mmt_engine_test_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        clear_interrupt();
    }
    void TearDown() override {
        fs::remove_all(m_dir);
        clear_interrupt();
    }

    // Small, fast problems: sizes 16..64, one warmup-free timed run per config.
    CollectOptions tiny(int num_shapes) const {
        CollectOptions o;
        o.generator.num_shapes = num_shapes;
        o.generator.sizes.min_size = 16;
        o.max_size = 64;
        o.warmup = 0;
        o.repeat = 1;
        return o;
    }
    fs::path path(const std::string& name) const { return m_dir / name; }

    CpuBackend m_backend;
    fs::path m_dir;
};

std::set<std::string> problem_keys(const core::Dataset& dataset) {
    std::set<std::string> keys;
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems) keys.insert(op.name + core::shape_key(p.shape));
    return keys;
}

TEST_F(Engine, RecordsEveryKeptConfigAndTheReferencePerProblem) {
    auto o = tiny(4);
    const auto summary = run_collection(o, m_backend);
    EXPECT_EQ(summary.problems_planned, 4u);
    EXPECT_EQ(summary.problems_collected, 4u);
    EXPECT_EQ(summary.dataset.num_problems(), 4u);
    EXPECT_EQ(summary.configs_considered, 80u);  // 20 DEFAULT configs per problem
    EXPECT_EQ(summary.configs_timed, 64u);       // 16 distinct CPU tiles per problem
    EXPECT_EQ(summary.pruned.at("duplicate on cpu: num_stages and num_warps do not apply"), 16u);
    EXPECT_TRUE(summary.failed.empty());
    const std::size_t refs = cpu_reference_available() ? 4 : 0;
    EXPECT_EQ(summary.references_timed, refs);
    EXPECT_EQ(summary.dataset.num_timings(), 64u + refs);
    EXPECT_TRUE(summary.files.empty());  // no output: in memory only
    EXPECT_GT(summary.timed_kernel_seconds, 0.0);
    EXPECT_LE(summary.timed_kernel_seconds, summary.wall_seconds);

    for (const auto& entry : summary.dataset.to_table()) {
        std::size_t references = 0;
        for (const auto& tc : entry.sorted_configs) {
            if (is_reference_config(tc.config)) {
                ++references;
                EXPECT_EQ(tc.config.name, "aten_" + core::parse_op_key(entry.op).first);
            } else {
                EXPECT_EQ(tc.config.name, core::parse_op_key(entry.op).first + "_config");
                EXPECT_EQ(tc.config.even_k, entry.shape.K % tc.config.block_k == 0);
            }
        }
        EXPECT_EQ(references, cpu_reference_available() ? 1u : 0u);
    }
}

TEST_F(Engine, EveryFinishedProblemReachesActiveCollectors) {
    DatasetCollector collector("my machine");
    {
        CollectionScope scope(collector);
        run_collection(tiny(3), m_backend);
    }
    run_collection(tiny(2), m_backend);  // not collecting any more
    EXPECT_EQ(collector.get_dataset().num_problems(), 3u);
    ASSERT_EQ(collector.get_dataset().hardware().size(), 1u);
    EXPECT_EQ(collector.get_dataset().hardware()[0].name, "my machine");
}

TEST_F(Engine, WritesTheDatasetAndItsSidecar) {
    auto o = tiny(3);
    o.output = path("data");  // no extension: --format decides
    o.format = "msgpack";
    const auto summary = run_collection(o, m_backend);
    const auto file = path("data.msgpack");
    ASSERT_EQ(summary.files, std::vector<fs::path>{file});
    EXPECT_EQ(core::load_dataset(file).num_problems(), 3u);
    const auto meta = core::load_meta_sidecar(file);
    EXPECT_EQ(meta["run"]["search_mode"], "max-autotune");
    EXPECT_EQ(meta["run"]["search_space"], "DEFAULT");
    EXPECT_EQ(meta["run"]["warmup"], 0);
    EXPECT_EQ(meta["run"]["repeat"], 1);
    EXPECT_EQ(meta["tool"]["name"], "matmul_toolkit");
    ASSERT_EQ(meta["problems"].size(), 3u);
    for (const auto& [key, configs] : meta["problems"].items()) {
        for (const auto& [label, timing] : configs.items()) {
            EXPECT_TRUE(timing.contains("spread")) << label;
            EXPECT_LE(timing["min_ms"].get<double>(), timing["max_ms"].get<double>());
        }
    }
}

TEST_F(Engine, ChunksGoToNumberedFilesAndARerunResumesEverything) {
    auto o = tiny(5);
    o.output = path("data.json");
    o.chunk_size = 2;
    const auto first = run_collection(o, m_backend);
    const std::vector<fs::path> chunks{path("data_1.json"), path("data_2.json"), path("data_3.json")};
    EXPECT_EQ(first.files, chunks);
    EXPECT_EQ(core::load_dataset(chunks[0]).num_problems(), 2u);
    EXPECT_EQ(core::load_dataset(chunks[1]).num_problems(), 2u);
    EXPECT_EQ(core::load_dataset(chunks[2]).num_problems(), 1u);
    EXPECT_TRUE(fs::exists(core::meta_sidecar_path(chunks[2])));
    EXPECT_FALSE(fs::exists(path("data.json")));

    const auto again = run_collection(o, m_backend);
    EXPECT_EQ(again.problems_resumed, 5u);
    EXPECT_EQ(again.problems_collected, 0u);
    EXPECT_EQ(problem_keys(again.dataset), problem_keys(first.dataset));
    EXPECT_FALSE(fs::exists(path("data_4.json")));
}

TEST_F(Engine, ResumeRefusesAFileMeasuredWithOtherTimingSettings) {
    auto o = tiny(2);
    o.output = path("data.json");
    o.repeat = 3;
    run_collection(o, m_backend);
    o.repeat = 5;
    try {
        run_collection(o, m_backend);
        FAIL() << "a file timed with 3 runs was resumed with 5";
    } catch (const core::InputError& e) {
        EXPECT_EQ(std::string(e.what()), path("data.json").string() +
                                             ": was collected with repeat 3, this run has 5; choose another "
                                             "--output or move the file away");
    }
    EXPECT_EQ(core::load_dataset(path("data.json")).num_problems(), 2u);
    o.repeat = 3;
    o.generator.num_shapes = 3;
    EXPECT_EQ(run_collection(o, m_backend).problems_resumed, 2u) << "the same settings resume";
}

TEST_F(Engine, ALongerRunFillsTheLastChunkThenStartsNewOnes) {
    auto o = tiny(3);
    o.output = path("data.json");
    o.chunk_size = 2;
    run_collection(o, m_backend);  // data_1: 2 problems, data_2: 1
    o.generator.num_shapes = 6;
    const auto summary = run_collection(o, m_backend);
    EXPECT_EQ(summary.problems_resumed, 3u);
    EXPECT_EQ(summary.problems_collected, 3u);
    EXPECT_EQ(core::load_dataset(path("data_2.json")).num_problems(), 2u);
    EXPECT_EQ(core::load_dataset(path("data_3.json")).num_problems(), 2u);
    EXPECT_EQ(summary.dataset.num_problems(), 6u);
    o.chunk_size.reset();
    o.output = path("whole.json");
    EXPECT_EQ(problem_keys(run_collection(o, m_backend).dataset), problem_keys(summary.dataset));
}

TEST_F(Engine, AnInterruptSavesFinishedProblemsAndTheRerunCompletesTheSet) {
    auto o = tiny(4);
    o.output = path("data.json");
    // Ctrl-C arrives while the second problem is being measured.
    int finished = 0;
    const int saver = add_feedback_saver([&](const ProblemResult&) {
        if (++finished == 1) request_interrupt();
    });
    try {
        run_collection(o, m_backend);
        FAIL() << "the interrupt was ignored";
    } catch (const CollectionInterrupted& e) {
        EXPECT_EQ(e.summary().problems_collected, 1u);
        EXPECT_TRUE(e.summary().interrupted);
    }
    remove_feedback_saver(saver);
    EXPECT_EQ(core::load_dataset(path("data.json")).num_problems(), 1u);

    clear_interrupt();
    const auto rest = run_collection(o, m_backend);
    EXPECT_EQ(rest.problems_resumed, 1u);
    EXPECT_EQ(rest.problems_collected, 3u);
    EXPECT_EQ(core::load_dataset(path("data.json")).num_problems(), 4u);
}

TEST_F(Engine, WritesAChromeTracePerProblemWithOneEventPerTimedRun) {
    auto o = tiny(2);
    o.repeat = 3;
    o.trace_dir = path("traces");
    run_collection(o, m_backend);
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(path("traces"))) {
        ++files;
        std::ifstream in(entry.path());
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto doc = core::parse_json_text(text, entry.path().string());
        std::size_t runs = 0, configs = 0;
        for (const auto& event : doc["traceEvents"]) {
            runs += event["cat"] == "run";
            configs += event["cat"] == "config";
        }
        EXPECT_EQ(runs, 3 * configs);
        EXPECT_EQ(configs, cpu_reference_available() ? 17u : 16u);
    }
    EXPECT_EQ(files, 2u);
}

TEST_F(Engine, AConfigsFileTimesExactlyItsConfigs) {
    auto o = tiny(2);
    o.generator.ops = {"mm"};
    o.configs_file = fs::path(MMT_TEST_DATA_DIR) / "solution_flat.json";
    const auto solution = core::load_solution(o.configs_file);
    const auto summary = run_collection(o, m_backend);
    EXPECT_EQ(summary.configs_considered, 2 * solution.configs.size());
    for (const auto& entry : summary.dataset.to_table()) {
        for (const auto& tc : entry.sorted_configs) {
            if (is_reference_config(tc.config)) continue;
            bool listed = false;
            for (const auto& c : solution.configs) {
                listed |= c.block_m == tc.config.block_m && c.block_n == tc.config.block_n &&
                          c.block_k == tc.config.block_k && c.group_m == tc.config.group_m;
            }
            EXPECT_TRUE(listed) << describe_config(tc.config);
        }
    }
}

TEST_F(Engine, ExhaustiveSearchCountsEveryPrunedConfig) {
    auto o = tiny(1);
    o.search_space = SearchSpace::exhaustive;
    o.time_reference = false;
    CpuBackend big_cache(CpuBackendOptions{16 << 20});
    const auto summary = run_collection(o, big_cache);
    EXPECT_EQ(summary.configs_considered, 1875u);
    EXPECT_EQ(summary.configs_timed, 125u);
    EXPECT_EQ(summary.pruned.at("duplicate on cpu: num_stages and num_warps do not apply"), 1750u);
    EXPECT_EQ(summary.references_timed, 0u);
}

TEST_F(Engine, ShapesetProblemsAreCollectedInFileOrder) {
    auto o = tiny(1);
    o.shapeset = fs::path(MMT_TEST_DATA_DIR) / "shapeset_small.json";
    const auto shapeset = core::load_shapeset(o.shapeset);
    o.shapeset_dtypes = {"float32"};
    const auto plan = plan_collection(o, m_backend);
    EXPECT_EQ(plan.problems.size(), shapeset.num_shapes());
    EXPECT_EQ(plan.problems.front().op_key(), shapeset.operations.front().op);
}

TEST_F(Engine, AnExplicitProblemListIsMeasuredAsGiven) {
    CollectOptions o = tiny(1);
    o.problems = {make_problem("mm", "tn", 1, 33, 17, 9, "float32"),
                  make_problem("bmm", "nn", 2, 8, 8, 8, "float32")};
    const auto summary = run_collection(o, m_backend);
    EXPECT_EQ(summary.problems_collected, 2u);
    const auto& hw = summary.hardware;
    EXPECT_TRUE(summary.dataset.contains(hw, "mm_tn", o.problems[0].shape));
    EXPECT_TRUE(summary.dataset.contains(hw, "bmm", o.problems[1].shape));

    o.problems.push_back(o.problems[0]);
    EXPECT_THROW(plan_collection(o, m_backend), core::InputError);  // listed twice
    o.problems = {make_problem("mm", "nn", 1, 8, 8, 8, "bfloat16")};
    EXPECT_THROW(plan_collection(o, m_backend), core::InputError);
}

std::string bad_subject(const CollectOptions& o, const Backend& backend) {
    try {
        plan_collection(o, backend);
    } catch (const core::InputError& e) {
        return e.subject();
    }
    return "(accepted)";
}

TEST_F(Engine, BadInputIsRejectedBeforeAnyWork) {
    auto o = tiny(2);
    o.output = path("out.json");
    EXPECT_EQ(bad_subject(o, m_backend), "(accepted)");

    auto bad = o;
    bad.generator.sizes.min_size = 100;  // above --max-size 64
    EXPECT_EQ(bad_subject(bad, m_backend), "--max-size");
    bad = o;
    bad.max_size.reset();
    bad.generator.sizes.min_size = 4096;  // above the CPU's default --max-size
    EXPECT_EQ(bad_subject(bad, m_backend), "--min-size");
    bad = o;
    bad.generator.num_shapes = 0;
    EXPECT_EQ(bad_subject(bad, m_backend), "--num-shapes");
    bad = o;
    bad.generator.dtypes = {"bfloat16"};  // known, but not on the CPU backend
    EXPECT_EQ(bad_subject(bad, m_backend), "--dtypes");
    bad = o;
    bad.generator.ops = {"matmul"};
    EXPECT_EQ(bad_subject(bad, m_backend), "--ops");
    bad = o;
    bad.generator.layouts = {"NN"};
    EXPECT_EQ(bad_subject(bad, m_backend), "--layouts");
    bad = o;
    bad.search_mode = "fast";
    EXPECT_EQ(bad_subject(bad, m_backend), "--search-mode");
    bad = o;
    bad.repeat = 0;
    EXPECT_EQ(bad_subject(bad, m_backend), "--repeat");
    bad = o;
    bad.chunk_size = 0;
    EXPECT_EQ(bad_subject(bad, m_backend), "--chunk-size");
    bad = o;
    bad.output = path("out.csv");
    EXPECT_EQ(bad_subject(bad, m_backend), "--output");
    {
        std::ofstream(path("a_file")) << "x";
    }
    bad = o;
    bad.output = path("a_file") / "out.json";  // parent is a regular file
    EXPECT_EQ(bad_subject(bad, m_backend), "--output");
    bad = o;
    bad.shapeset = path("missing.json");
    EXPECT_NE(bad_subject(bad, m_backend), "(accepted)");
    bad = o;
    bad.configs_file = path("missing_solution.json");
    EXPECT_NE(bad_subject(bad, m_backend), "(accepted)");

    EXPECT_THROW(run_collection(bad, m_backend), core::InputError);
    EXPECT_FALSE(fs::exists(path("out.json")));
}

TEST_F(Engine, AShapesetInADtypeTheBackendLacksNamesTheFile) {
    auto o = tiny(1);
    o.shapeset = fs::path(MMT_SOURCE_DIR) / "data" / "shapesets" / "transformer_shapes.json";
    EXPECT_EQ(bad_subject(o, m_backend), o.shapeset.string());
}

TEST_F(Engine, ACorruptOutputIsNotOverwritten) {
    auto o = tiny(1);
    o.output = path("data.json");
    {
        std::ofstream(o.output) << "{\"hardware\": {";
    }
    EXPECT_THROW(run_collection(o, m_backend), core::InputError);
    std::ifstream in(o.output);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "{\"hardware\": {");
}

TEST(FormatSummary, ReportsCountsReasonsAndThroughput) {
    CollectionSummary s;
    s.backend = "cpu";
    s.hardware = "Test CPU";
    s.problems_planned = 3;
    s.problems_collected = 2;
    s.problems_resumed = 1;
    s.configs_considered = 40;
    s.configs_timed = 30;
    s.pruned["too big"] = 6;
    s.failed["wrong result"] = 4;
    s.wall_seconds = 2.0;
    s.timed_kernel_seconds = 1.5;
    const auto text = format_summary(s);
    EXPECT_NE(text.find("2 collected, 1 already in the output"), std::string::npos) << text;
    EXPECT_NE(text.find("40 considered, 30 timed, 6 pruned, 4 failed"), std::string::npos) << text;
    EXPECT_NE(text.find("pruned 6: too big"), std::string::npos) << text;
    EXPECT_NE(text.find("failed 4: wrong result"), std::string::npos) << text;
    EXPECT_NE(text.find("15.0 configs/s, 75.0 % of wall time"), std::string::npos) << text;
    EXPECT_NE(text.find("; 1.00 s per GEMM collected"), std::string::npos) << text;
}

// Forwards to the CPU backend and records what the engine hands Backend::plan().
class PlanRecorder final : public Backend {
public:
    explicit PlanRecorder(Backend& inner) : m_inner(inner) {}
    std::string name() const override { return m_inner.name(); }
    std::string hardware_name() const override { return m_inner.hardware_name(); }
    std::vector<std::string> supported_dtypes() const override { return m_inner.supported_dtypes(); }
    std::vector<std::string> supported_ops() const override { return m_inner.supported_ops(); }
    CollectionDefaults collection_defaults() const override { return m_inner.collection_defaults(); }
    void plan(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for) override {
        calls.push_back(problems);
        for (const auto& p : problems) configs.push_back(configs_for(p));
    }
    PruneResult prune(const std::vector<core::GemmConfig>& c, const Problem& p) const override {
        offered.push_back(c);
        return m_inner.prune(c, p);
    }
    void prepare(const Problem& p, std::uint64_t seed) override {
        prepared.push_back(p);
        m_inner.prepare(p, seed);
    }
    Timing time(const Problem& p, const core::GemmConfig& c, const TimingOptions& o) override {
        return m_inner.time(p, c, o);
    }
    Timing time_reference(const Problem& p, const TimingOptions& o) override { return m_inner.time_reference(p, o); }
    double timed_kernel_seconds() const override { return m_inner.timed_kernel_seconds(); }

    std::vector<std::vector<Problem>> calls;
    std::vector<std::vector<core::GemmConfig>> configs;
    mutable std::vector<std::vector<core::GemmConfig>> offered;
    std::vector<Problem> prepared;

private:
    Backend& m_inner;
};

// int8 problems in DEFAULT get Inductor's int8 list (11 configs), float ones the mm list,
// in the same run.
TEST_F(Engine, Int8ProblemsTakeInductorsInt8Configs) {
    auto o = tiny(6);
    o.generator.ops = {"mm"};
    o.generator.dtypes = {"int8", "float32"};
    o.generator.sizes.min_size = 24;
    const auto plan = plan_collection(o, m_backend);
    std::size_t int8 = 0;
    for (const auto& p : plan.problems) {
        const auto& configs = planned_configs(plan, p);
        if (p.dtype() == "int8") {
            ++int8;
            EXPECT_EQ(configs.size(), 11u);
            for (const auto& c : configs) EXPECT_GE(c.block_k, 32);
        } else {
            EXPECT_EQ(configs.size(), 20u);
        }
    }
    ASSERT_GT(int8, 0u);
    const auto summary = run_collection(o, m_backend);
    EXPECT_EQ(summary.configs_considered, 11 * int8 + 20 * (6 - int8));
    EXPECT_TRUE(summary.failed.empty());
}

TEST_F(Engine, PlansThePendingProblemsOnceBeforeMeasuring) {
    auto o = tiny(3);
    o.output = path("data.json");
    o.allow_tf32 = true;
    PlanRecorder first(m_backend);
    run_collection(o, first);
    // One call, every problem in the order measured, with exactly the configs prune() got.
    ASSERT_EQ(first.calls.size(), 1u);
    ASSERT_EQ(first.calls[0].size(), 3u);
    ASSERT_EQ(first.prepared.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(first.calls[0][i].op_key(), first.prepared[i].op_key());
        EXPECT_TRUE(first.calls[0][i].shape == first.prepared[i].shape);
        EXPECT_EQ(first.configs[i], first.offered[i]);
    }
    // A resumed run plans only what is left: here nothing.
    PlanRecorder again(m_backend);
    run_collection(o, again);
    ASSERT_EQ(again.calls.size(), 1u);
    EXPECT_TRUE(again.calls[0].empty());
    EXPECT_TRUE(again.prepared.empty());
}

TEST_F(Engine, SkippedConfigsAreNeitherTimedNorWritten) {
    auto o = tiny(1);
    o.problems = {make_problem("mm", "nn", 1, 70, 80, 40, "float32")};
    o.skip_configs = {"64x64x32 g8 s1 w4", reference_config(o.problems[0]).name};
    const auto summary = run_collection(o, m_backend);
    ASSERT_EQ(summary.problems_collected, 1u);
    const auto* p = summary.dataset.find_hardware(summary.hardware)->find("mm")->find(o.problems[0].shape);
    ASSERT_NE(p, nullptr);
    for (const auto& tc : p->timed_configs) {
        EXPECT_NE(describe_config(tc.config), "64x64x32 g8 s1 w4");
        EXPECT_FALSE(is_reference_config(tc.config));
    }
    EXPECT_EQ(summary.references_timed, 0u);
    EXPECT_EQ(p->timed_configs.size(), summary.configs_timed);
}

TEST_F(Engine, ADeviceFaultSavesFinishedProblemsAndCarriesThePartialOne) {
    auto o = tiny(1);
    o.output = path("data.json");
    // The first problem is collected fault-free; the second run resumes it and faults on the second.
    o.problems = {make_problem("mm", "nn", 1, 16, 16, 16, "float32")};
    run_collection(o, m_backend);
    o.problems.push_back(make_problem("mm", "nn", 1, 70, 80, 40, "float32"));
    ::setenv(kTestFaultVariable, "64x64x32", 1);
    try {
        run_collection(o, m_backend);
        ::unsetenv(kTestFaultVariable);
        FAIL() << "no CollectionFaulted";
    } catch (const CollectionFaulted& e) {
        ::unsetenv(kTestFaultVariable);
        EXPECT_EQ(e.config(), "64x64x32 g8 s1 w4");
        EXPECT_NE(e.cause().find("injected fault"), std::string::npos);
        EXPECT_EQ(e.attempted().back(), e.config());
        EXPECT_EQ(e.partial().timed_configs.size() + 1, e.attempted().size());
        EXPECT_TRUE(e.partial().shape == o.problems[1].shape);
        std::size_t faults = 0;
        for (const auto& [reason, n] : e.summary().failed) {
            if (reason.rfind("device fault: ", 0) == 0) faults += n;
        }
        EXPECT_EQ(faults, 1u);
        // The first problem is still there; the faulting one was not written.
        const auto saved = core::load_dataset(path("data.json"));
        EXPECT_EQ(saved.num_problems(), 1u);
        EXPECT_TRUE(saved.contains(e.summary().hardware, "mm", o.problems[0].shape));
    }
}

// A backend that measures whole problems: its own two configs (the second fails) and the
// reference, or a whole-problem failure when `fail_all` is set.
class BatchBackend final : public Backend {
public:
    std::string name() const override { return "batch"; }
    std::string hardware_name() const override { return "batch hw"; }
    std::vector<std::string> supported_dtypes() const override { return {"float32"}; }
    std::vector<std::string> supported_ops() const override { return {"mm", "addmm", "bmm"}; }
    PruneResult prune(const std::vector<core::GemmConfig>& configs, const Problem&) const override {
        return {configs, {}};
    }
    void prepare(const Problem&, std::uint64_t) override {}
    Timing time(const Problem&, const core::GemmConfig&, const TimingOptions&) override {
        throw core::Error("batch", "time() called");
    }
    Timing time_reference(const Problem&, const TimingOptions&) override { throw core::Error("batch", "called"); }
    double timed_kernel_seconds() const override { return 0.0; }
    bool measures_in_batches() const override { return true; }
    std::vector<BatchEntry> measure_batch(const Problem& problem, const std::vector<core::GemmConfig>& kept,
                                          const std::string& own_space, bool with_reference,
                                          const TimingOptions&) override {
        spaces.push_back(own_space);
        kept_sizes.push_back(kept.size());
        if (fail_all) throw core::Error("worker died", "exited with code 1");
        std::vector<BatchEntry> entries(2);
        entries[0].config = kept.front();
        entries[0].config.block_m = 128;
        entries[0].timing = Timing{0.5, 0.4, 0.7, {0.4, 0.5, 0.7}, {}};
        entries[1].config = kept.front();
        entries[1].error = "wrong result: off by 1";
        if (with_reference) {
            BatchEntry reference;
            reference.config = reference_config(problem);
            reference.reference = true;
            reference.timing = Timing{0.3, 0.3, 0.3, {0.3}, {}};
            entries.push_back(reference);
        }
        return entries;
    }
    std::vector<std::pair<std::string, std::string>> environment() const override { return {{"tool", "1.0"}}; }

    bool fail_all = false;
    std::vector<std::string> spaces;
    std::vector<std::size_t> kept_sizes;
};

TEST_F(Engine, ABatchBackendsEntriesAreCountedLikeTimedConfigs) {
    BatchBackend backend;
    auto o = tiny(2);
    o.output = path("d.json");
    const auto summary = run_collection(o, backend);
    EXPECT_EQ(backend.spaces, (std::vector<std::string>{"DEFAULT", "DEFAULT"}));
    EXPECT_EQ(summary.configs_considered, 4u);  // the entries returned, not the 20 offered
    EXPECT_EQ(summary.configs_timed, 2u);
    EXPECT_EQ(summary.references_timed, 2u);
    EXPECT_EQ(summary.failed, (std::map<std::string, std::size_t>{{"wrong result", 2}}));
    EXPECT_EQ(summary.dataset.num_timings(), 4u);
    for (const auto& entry : summary.dataset.to_table()) {
        for (const auto& tc : entry.sorted_configs) {
            EXPECT_DOUBLE_EQ(tc.time_ms, is_reference_config(tc.config) ? 0.3 : 0.5);
        }
    }
    const auto meta = core::load_meta_sidecar(path("d.json"));
    EXPECT_EQ(meta["run"]["environment"]["tool"], "1.0");
    for (const auto& [key, configs] : meta["problems"].items()) {
        ASSERT_EQ(configs.size(), 2u) << configs.dump();  // the timed config and aten_mm/addmm/bmm
        for (const auto& [label, doc] : configs.items()) {
            EXPECT_DOUBLE_EQ(doc["max_ms"].get<double>(), label.rfind("aten_", 0) == 0 ? 0.3 : 0.7) << label;
        }
    }
}

TEST_F(Engine, ABatchThatFailsCountsEveryKeptConfigAndTheRunGoesOn) {
    BatchBackend backend;
    backend.fail_all = true;
    auto o = tiny(2);
    o.configs_file = fs::path(MMT_TEST_DATA_DIR) / "solution_flat.json";
    const auto summary = run_collection(o, backend);
    EXPECT_EQ(backend.spaces, (std::vector<std::string>{"", ""}));  // exactly the file's configs
    EXPECT_EQ(summary.problems_empty, 2u);
    EXPECT_EQ(summary.failed.at("worker died: exited with code 1"), backend.kept_sizes[0] + backend.kept_sizes[1]);
    EXPECT_EQ(summary.reference_failed.at("worker died: exited with code 1"), 2u);
}

TEST_F(Engine, AnUnbatchedBackendsSidecarHasNoEnvironment) {
    auto o = tiny(1);
    o.output = path("d.json");
    run_collection(o, m_backend);
    EXPECT_FALSE(core::load_meta_sidecar(path("d.json"))["run"].contains("environment"));
}

}  // namespace
}  // namespace mmt::collect
