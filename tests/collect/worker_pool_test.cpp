// The worker pool's pieces that need no process: --devices parsing and the worker's side
// of the pipe protocol (tests/cli/collect_workers_test runs real worker processes).

#include "matmul_toolkit/collect/worker_pool.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/cpu_backend.hpp"
#include "matmul_toolkit/collect/device_fault.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::collect {
namespace {

TEST(ParseDevices, ListsAndAll) {
    EXPECT_EQ(parse_devices("0,1,3", 4), (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(parse_devices("2", 4), std::vector<int>{2});
    EXPECT_EQ(parse_devices("all", 3), (std::vector<int>{0, 1, 2}));
}

TEST(ParseDevices, RejectsBadLists) {
    for (const auto& [text, available] : std::vector<std::pair<std::string, int>>{
             {"", 2}, {"0,", 2}, {"a", 2}, {"-1", 2}, {"1x", 2}, {"0,0", 2}, {"2", 2}, {"all", 0}}) {
        try {
            parse_devices(text, available);
            FAIL() << "accepted '" << text << "' with " << available << " devices";
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), "--devices") << text;
        }
    }
}

TEST(ServeWorker, AnswersOneLinePerProblemWithItsTimings) {
    const auto a = make_problem("mm", "nn", 1, 24, 40, 16, "float32");
    const auto b = make_problem("bmm", "nt", 2, 16, 16, 32, "float32");
    auto request = [](long index, const Problem& p) {
        return core::OrderedJson{{"index", index},
                                 {"problem", {{"op", p.op}, {"layout", p.layout}, {"shape", core::shape_key(p.shape)},
                                              {"alpha", p.alpha}, {"beta", p.beta}}}}
            .dump();
    };
    const core::OrderedJson options{{"search_space", "DEFAULT"}, {"configs_file", ""}, {"search_mode", "max-autotune"},
                                    {"allow_tf32", false}, {"time_reference", false}, {"warmup", 0},
                                    {"repeat", 1}, {"seed", 3}};
    std::istringstream in(options.dump() + "\n" + request(4, a) + "\n" + request(9, b) + "\n");
    std::ostringstream out;
    CpuBackend backend;
    serve_worker(backend, in, out);

    std::istringstream replies(out.str());
    std::string line;
    std::vector<core::OrderedJson> got;
    while (std::getline(replies, line)) got.push_back(core::parse_json_text(line, "reply"));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0]["index"], 4);
    EXPECT_EQ(got[1]["index"], 9);
    EXPECT_EQ(got[0]["hardware"], backend.hardware_name());
    EXPECT_EQ(got[0]["configs_considered"], 20);  // DEFAULT
    const auto dataset = core::dataset_from_document(got[1]["dataset"], "reply");
    ASSERT_EQ(dataset.num_problems(), 1u);
    EXPECT_TRUE(dataset.contains(backend.hardware_name(), "bmm_nt", b.shape));
    EXPECT_EQ(dataset.num_timings(), got[1]["configs_timed"].get<std::size_t>());
    EXPECT_FALSE(got[1]["meta"].empty());
}

TEST(ServeWorker, AProblemItCannotMeasureIsAnErrorReplyNotAnExit) {
    auto bad = make_problem("mm", "nn", 1, 24, 40, 16, "float16");  // the CPU backend has no float16
    const core::OrderedJson options{{"search_space", "DEFAULT"}, {"configs_file", ""}, {"search_mode", "max-autotune"},
                                    {"allow_tf32", false}, {"time_reference", false}, {"warmup", 0},
                                    {"repeat", 1}, {"seed", 3}};
    const core::OrderedJson request{{"index", 0},
                                    {"problem", {{"op", "mm"}, {"layout", "nn"}, {"shape", core::shape_key(bad.shape)},
                                                 {"alpha", 1.0}, {"beta", 1.0}}}};
    std::istringstream in(options.dump() + "\n" + request.dump() + "\n");
    std::ostringstream out;
    CpuBackend backend;
    serve_worker(backend, in, out);
    const auto reply = core::parse_json_text(out.str(), "reply");
    EXPECT_NE(reply["error"].get<std::string>().find("float16"), std::string::npos) << reply.dump();
}

// The CPU backend, recording what Backend::plan() is handed.
class PlanRecorder final : public Backend {
public:
    std::string name() const override { return m_cpu.name(); }
    std::string hardware_name() const override { return m_cpu.hardware_name(); }
    std::vector<std::string> supported_dtypes() const override { return m_cpu.supported_dtypes(); }
    std::vector<std::string> supported_ops() const override { return m_cpu.supported_ops(); }
    CollectionDefaults collection_defaults() const override { return m_cpu.collection_defaults(); }
    void plan(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for) override {
        calls.push_back(problems);
        for (const auto& p : problems) config_counts.push_back(configs_for(p).size());
    }
    PruneResult prune(const std::vector<core::GemmConfig>& c, const Problem& p) const override {
        return m_cpu.prune(c, p);
    }
    void prepare(const Problem& p, std::uint64_t seed) override { m_cpu.prepare(p, seed); }
    Timing time(const Problem& p, const core::GemmConfig& c, const TimingOptions& o) override {
        return m_cpu.time(p, c, o);
    }
    Timing time_reference(const Problem& p, const TimingOptions& o) override { return m_cpu.time_reference(p, o); }
    double timed_kernel_seconds() const override { return m_cpu.timed_kernel_seconds(); }

    std::vector<std::vector<Problem>> calls;
    std::vector<std::size_t> config_counts;

private:
    CpuBackend m_cpu;
};

TEST(ServeWorker, PlansTheProblemsTheHeaderListsBeforeTheFirstRequest) {
    const auto a = make_problem("mm", "nn", 1, 24, 40, 16, "float32");
    const auto b = make_problem("bmm", "nt", 2, 16, 16, 32, "float32");
    auto problem_json = [](const Problem& p) {
        return core::OrderedJson{{"op", p.op}, {"layout", p.layout}, {"shape", core::shape_key(p.shape)},
                                 {"alpha", p.alpha}, {"beta", p.beta}};
    };
    core::OrderedJson header{{"search_space", "DEFAULT"}, {"configs_file", ""}, {"search_mode", "max-autotune"},
                             {"allow_tf32", false}, {"time_reference", false}, {"warmup", 0},
                             {"repeat", 1}, {"seed", 3}};
    header["plan"] = core::OrderedJson::array({problem_json(b), problem_json(a)});
    const core::OrderedJson request{{"index", 0}, {"problem", problem_json(a)}};
    std::istringstream in(header.dump() + "\n" + request.dump() + "\n");
    std::ostringstream out;
    PlanRecorder backend;
    serve_worker(backend, in, out);
    // The header's plan first (in its order, DEFAULT configs each), then the request's own.
    ASSERT_EQ(backend.calls.size(), 2u);
    ASSERT_EQ(backend.calls[0].size(), 2u);
    EXPECT_EQ(backend.calls[0][0].op_key(), "bmm_nt");
    EXPECT_TRUE(backend.calls[0][1].shape == a.shape);
    ASSERT_EQ(backend.calls[1].size(), 1u);
    EXPECT_TRUE(backend.calls[1][0].shape == a.shape);
    EXPECT_EQ(backend.config_counts, (std::vector<std::size_t>{20, 20, 20}));
}

TEST(ServeWorker, ADeviceFaultIsReportedWithWhatWasMeasuredAndEndsTheWorker) {
    const auto a = make_problem("mm", "nn", 1, 70, 80, 40, "float32");
    const core::OrderedJson options{{"search_space", "DEFAULT"}, {"configs_file", ""}, {"search_mode", "max-autotune"},
                                    {"allow_tf32", false}, {"time_reference", true}, {"warmup", 0},
                                    {"repeat", 1}, {"seed", 3}};
    const core::OrderedJson problem{{"op", "mm"}, {"layout", "nn"}, {"shape", core::shape_key(a.shape)},
                                    {"alpha", 1.0}, {"beta", 1.0}};
    const core::OrderedJson first{{"index", 2}, {"problem", problem}};
    // A second request that must never be read: the worker stops at the fault.
    const core::OrderedJson second{{"index", 3}, {"problem", problem}};
    std::istringstream in(options.dump() + "\n" + first.dump() + "\n" + second.dump() + "\n");
    std::ostringstream out;
    CpuBackend backend;
    ::setenv(kTestFaultVariable, "64x64x32", 1);
    const bool faulted = serve_worker(backend, in, out);
    ::unsetenv(kTestFaultVariable);
    EXPECT_TRUE(faulted);

    std::istringstream replies(out.str());
    std::string line;
    std::vector<core::OrderedJson> got;
    while (std::getline(replies, line)) got.push_back(core::parse_json_text(line, "reply"));
    ASSERT_EQ(got.size(), 1u);
    const auto& reply = got[0];
    EXPECT_EQ(reply["index"], 2);
    EXPECT_EQ(reply["fault"]["config"], "64x64x32 g8 s1 w4");
    EXPECT_NE(reply["fault"]["error"].get<std::string>().find("injected fault"), std::string::npos);
    // Every config before the faulting one was timed and is in the reply; the attempted
    // list is those plus the faulting one, and no reference was timed.
    const auto attempted = reply["attempted"].get<std::vector<std::string>>();
    ASSERT_FALSE(attempted.empty());
    EXPECT_EQ(attempted.back(), "64x64x32 g8 s1 w4");
    const auto dataset = core::dataset_from_document(reply["dataset"], "reply");
    EXPECT_EQ(dataset.num_timings(), attempted.size() - 1);
    EXPECT_EQ(reply["configs_timed"].get<std::size_t>(), attempted.size() - 1);
    EXPECT_EQ(reply["references_timed"], 0);
    EXPECT_EQ(reply["failed"].size(), 1u);

    // A fresh worker resumes the problem without the attempted configs: the rest and the reference.
    core::OrderedJson resume = first;
    resume["skip"] = attempted;
    std::istringstream in2(options.dump() + "\n" + resume.dump() + "\n");
    std::ostringstream out2;
    CpuBackend fresh;
    EXPECT_FALSE(serve_worker(fresh, in2, out2));
    const auto done = core::parse_json_text(out2.str(), "reply");
    EXPECT_FALSE(done.contains("fault"));
    const auto rest = core::dataset_from_document(done["dataset"], "reply");
    EXPECT_EQ(done["configs_timed"].get<std::size_t>() + done["references_timed"].get<std::size_t>(),
              rest.num_timings());
    EXPECT_EQ(done["references_timed"], 1);
    for (const auto& hw : rest.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems)
                for (const auto& tc : p.timed_configs) {
                    EXPECT_EQ(std::count(attempted.begin(), attempted.end(), describe_config(tc.config)), 0)
                        << describe_config(tc.config) << " was timed twice";
                }
}

}  // namespace
}  // namespace mmt::collect
