// libmmt_rank.so through its C API (include/matmul_toolkit/mmt_rank.h): open errors, the
// buffer protocol, recommend against the CLI's `recommend --json --no-prune`, decide against
// export-lut's tables, bad requests, and concurrent calls on one model.

#include "matmul_toolkit/mmt_rank.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../cli/cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/json_codec.hpp"
#include "matmul_toolkit/model/decision_policy.hpp"
#include "matmul_toolkit/model/lut_export.hpp"

namespace {

namespace fs = std::filesystem;
using mmt::core::OrderedJson;

const fs::path kSource = MMT_SOURCE_DIR;
const fs::path kModel = kSource / "data/models/inductor_h200.pt";
const fs::path kModelSuite = kSource / "data/shapesets/model_suite.json";
const fs::path kTransformerShapes = kSource / "data/shapesets/transformer_shapes.json";

struct ModelCloser {
    void operator()(mmt_rank_model* model) const { mmt_rank_close(model); }
};
using Model = std::unique_ptr<mmt_rank_model, ModelCloser>;

Model open_model(const fs::path& path = kModel) {
    char error[512];
    Model model(mmt_rank_open(path.c_str(), error, sizeof error));
    EXPECT_NE(model, nullptr) << error;
    return model;
}

/// A call's status, answer and error line, asked twice as a caller does: first how much.
struct Answer {
    int status = -1;
    std::string text;
    std::string error;
};

using Call = std::function<int(char*, size_t, size_t*, char*, size_t)>;

Answer ask(const Call& call) {
    Answer a;
    size_t needed = 0;
    char error[1024];
    a.status = call(nullptr, 0, &needed, error, sizeof error);
    if (a.status != MMT_RANK_BUFFER_TOO_SMALL) {
        a.error = error;
        return a;
    }
    std::vector<char> out(needed);
    a.status = call(out.data(), out.size(), &needed, error, sizeof error);
    a.error = error;
    if (a.status == MMT_RANK_OK) a.text = out.data();
    return a;
}

Answer recommend(mmt_rank_model* model, const std::string& request) {
    return ask([&](char* out, size_t size, size_t* needed, char* error, size_t error_size) {
        return mmt_rank_recommend(model, request.c_str(), out, size, needed, error, error_size);
    });
}

Answer decide(mmt_rank_model* model, const std::string& request) {
    return ask([&](char* out, size_t size, size_t* needed, char* error, size_t error_size) {
        return mmt_rank_decide(model, request.c_str(), out, size, needed, error, error_size);
    });
}

Answer info(const mmt_rank_model* model) {
    return ask([&](char* out, size_t size, size_t* needed, char* error, size_t error_size) {
        return mmt_rank_info(model, out, size, needed, error, error_size);
    });
}

/// The text without its "ranking_ms" lines: the one thing that differs run to run.
std::string without_timing(const std::string& text) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.find("\"ranking_ms\"") == std::string::npos) out += line + "\n";
    }
    return out;
}

class RankLibrary : public ::testing::Test {
protected:
    void SetUp() override { dir = mmt::testing::fresh_temp_dir("mmt_rank_test"); }
    void TearDown() override { fs::remove_all(dir); }

    mmt::testing::CliResult cli(std::vector<std::string> args) {
        return mmt::testing::run_cli(args, dir / ("cli" + std::to_string(++runs)));
    }

    fs::path dir;
    int runs = 0;
};

// ---- opening -------------------------------------------------------------------------------

TEST_F(RankLibrary, FilesThatAreNoModelGiveNullAndOneLineNamingTheFile) {
    const std::string shipped = mmt::core::read_file(kModel);
    const auto truncated = dir / "truncated.pt";
    mmt::core::write_file_atomically(truncated, shipped.substr(0, shipped.size() - 100));
    const auto dataset = dir / "dataset.pt";
    fs::copy_file(kSource / "data/datasets/sample_cpu.json", dataset);
    const std::pair<fs::path, const char*> cases[] = {
        {dir / "missing.pt", "no such file"},
        {truncated, "not a matmul_toolkit checkpoint"},
        {dataset, "not a matmul_toolkit checkpoint: not a zip archive"},
    };
    for (const auto& [path, why] : cases) {
        char error[512] = "untouched";
        EXPECT_EQ(mmt_rank_open(path.c_str(), error, sizeof error), nullptr) << path;
        const std::string line = error;
        EXPECT_EQ(line.rfind(path.string() + ": ", 0), 0u) << line;
        EXPECT_NE(line.find(why), std::string::npos) << line;
        EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    }
    // A short error buffer gets as much of the line as fits, NUL-terminated; none at all is fine.
    char tiny[6];
    EXPECT_EQ(mmt_rank_open((dir / "missing.pt").c_str(), tiny, sizeof tiny), nullptr);
    EXPECT_EQ(std::string(tiny), (dir / "missing.pt").string().substr(0, 5));
    EXPECT_EQ(mmt_rank_open((dir / "missing.pt").c_str(), nullptr, 0), nullptr);
}

TEST_F(RankLibrary, AnEmptyPathOpensTheDefaultModel) {
    char error[512];
    Model model(mmt_rank_open("", error, sizeof error));
    ASSERT_NE(model, nullptr) << error;
    EXPECT_EQ(error[0], '\0');
    const auto doc = OrderedJson::parse(info(model.get()).text);
    EXPECT_EQ(fs::path(doc["path"].get<std::string>()).filename(), "inductor_h200.pt");
}

TEST_F(RankLibrary, InfoDescribesTheModelAndItsFile) {
    const auto model = open_model();
    const Answer a = info(model.get());
    ASSERT_EQ(a.status, MMT_RANK_OK) << a.error;
    const auto doc = OrderedJson::parse(a.text);
    EXPECT_EQ(doc["path"], kModel.string());
    EXPECT_EQ(doc["hardware"], "NVIDIA H200");
    EXPECT_EQ(doc["is_gpu"], true);
    EXPECT_EQ(doc["default_dtype"], "float16");
    EXPECT_EQ(doc["vendor_rows"], true);
    EXPECT_EQ(doc["ensemble"], 3);
    EXPECT_EQ(doc["model_type"], "base");
    EXPECT_EQ(doc["hidden_dims"], OrderedJson::parse("[288, 144]"));
    EXPECT_EQ(doc["feature_names"].size(), 68u);
    EXPECT_EQ(doc["feature_names"][0], "op_mm");
    // The digest coreutils computes of the same bytes.
    const std::string command = "sha256sum " + mmt::testing::shell_quote(kModel.string()) + " > " +
                                mmt::testing::shell_quote((dir / "sum.txt").string());
    ASSERT_EQ(std::system(command.c_str()), 0);
    EXPECT_EQ(doc["sha256"], mmt::testing::slurp(dir / "sum.txt").substr(0, 64));
    EXPECT_EQ(mmt_rank_api_version(), MMT_RANK_API_VERSION);
}

// ---- the buffer protocol ---------------------------------------------------------------------

TEST_F(RankLibrary, AnAnswerThatDoesNotFitWritesNothingAndSaysHowMuchItNeeds) {
    const auto model = open_model();
    size_t needed = 0;
    char error[256];
    ASSERT_EQ(mmt_rank_info(model.get(), nullptr, 0, &needed, error, sizeof error), MMT_RANK_BUFFER_TOO_SMALL);
    ASSERT_GT(needed, 100u);
    EXPECT_NE(std::string(error).find(std::to_string(needed)), std::string::npos) << error;

    std::vector<char> short_buffer(needed - 1, 'x');
    size_t again = 0;
    EXPECT_EQ(mmt_rank_info(model.get(), short_buffer.data(), short_buffer.size(), &again, error, sizeof error),
              MMT_RANK_BUFFER_TOO_SMALL);
    EXPECT_EQ(again, needed);
    EXPECT_TRUE(std::all_of(short_buffer.begin(), short_buffer.end(), [](char c) { return c == 'x'; }));

    std::vector<char> exact(needed, 'x');
    EXPECT_EQ(mmt_rank_info(model.get(), exact.data(), exact.size(), &again, error, sizeof error), MMT_RANK_OK);
    EXPECT_EQ(again, needed);
    EXPECT_EQ(error[0], '\0');
    EXPECT_EQ(std::string(exact.data()).size(), needed - 1);
    // needed and error may be NULL.
    EXPECT_EQ(mmt_rank_info(model.get(), exact.data(), exact.size(), nullptr, nullptr, 0), MMT_RANK_OK);
}

// recommend's ranking_ms differ from call to call, so its length does: the retry gets the
// answer the first call computed, of exactly the size it said.
TEST_F(RankLibrary, TheRetryOfARecommendationGetsTheAnswerOfTheSizeItWasTold) {
    const auto model = open_model();
    const std::string request = R"({"shapeset": ")" + kTransformerShapes.string() + R"(", "top_k": 3})";
    for (int attempt = 0; attempt < 5; ++attempt) {
        size_t needed = 0;
        char error[256];
        ASSERT_EQ(mmt_rank_recommend(model.get(), request.c_str(), nullptr, 0, &needed, error, sizeof error),
                  MMT_RANK_BUFFER_TOO_SMALL);
        std::vector<char> out(needed);
        size_t again = 0;
        ASSERT_EQ(mmt_rank_recommend(model.get(), request.c_str(), out.data(), out.size(), &again, error, sizeof error),
                  MMT_RANK_OK)
            << error;
        EXPECT_EQ(again, needed);
        EXPECT_EQ(std::string(out.data()).size() + 1, needed);
    }
    // Another question in between is answered afresh, not with the kept answer.
    size_t needed = 0;
    ASSERT_EQ(mmt_rank_recommend(model.get(), request.c_str(), nullptr, 0, &needed, nullptr, 0), MMT_RANK_BUFFER_TOO_SMALL);
    const Answer other = recommend(model.get(), R"({"m": 64, "n": 64, "k": 64})");
    EXPECT_EQ(OrderedJson::parse(other.text)["problems"].size(), 1u);
}

// ---- recommend ---------------------------------------------------------------------------------

TEST_F(RankLibrary, RecommendAnswersWhatTheCliPrintsWithNoPrune) {
    const auto model = open_model();
    const std::pair<std::string, std::vector<std::string>> cases[] = {
        {R"({"m": 1024, "n": 4096, "k": 4096, "dtype": "bfloat16"})",
         {"--m", "1024", "--n", "4096", "--k", "4096", "--dtype", "bfloat16"}},
        {R"({"op": "bmm", "batch": 8, "m": 512, "n": 64, "k": 513, "dtype": "float16", "layout": "nt", "top_k": 3,
             "search_space": "EXHAUSTIVE"})",
         {"--op", "bmm", "--batch", "8", "--m", "512", "--n", "64", "--k", "513", "--dtype", "float16", "--layout", "nt",
          "--top-k", "3", "--search-space", "EXHAUSTIVE"}},
        {R"({"op": "addmm", "m": 77, "n": 4096, "k": 1000, "dtype": "float32", "allow_tf32": true, "top_k": 10})",
         {"--op", "addmm", "--m", "77", "--n", "4096", "--k", "1000", "--dtype", "float32", "--allow-tf32", "--top-k", "10"}},
        {R"({"shapeset": ")" + kModelSuite.string() + R"(", "top_k": 2})", {"--shapeset", kModelSuite.string(), "--top-k", "2"}},
        {R"({"shapeset": ")" + kTransformerShapes.string() + R"("})", {"--shapeset", kTransformerShapes.string()}},
        {R"({"shapeset": ")" + kTransformerShapes.string() + R"(", "search_space": "EXHAUSTIVE", "top_k": 8})",
         {"--shapeset", kTransformerShapes.string(), "--search-space", "EXHAUSTIVE", "--top-k", "8"}},
    };
    for (const auto& [request, flags] : cases) {
        const Answer ours = recommend(model.get(), request);
        ASSERT_EQ(ours.status, MMT_RANK_OK) << request << ": " << ours.error;
        std::vector<std::string> args{"recommend", "--model", kModel.string(), "--json", "--no-prune"};
        args.insert(args.end(), flags.begin(), flags.end());
        const auto theirs = cli(args);
        ASSERT_EQ(theirs.exit_code, 0) << theirs.err;
        EXPECT_EQ(without_timing(ours.text), without_timing(theirs.out)) << request;
        const auto answer = OrderedJson::parse(ours.text);  // a range-for over a temporary's member dangles
        for (const auto& problem : answer["problems"]) {
            EXPECT_GE(problem["ranking_ms"].get<double>(), 0.0);
        }
    }
}

TEST_F(RankLibrary, RecommendTakesAListOfProblemsAsTheShapesetGivesThem) {
    const auto model = open_model();
    const auto shapeset = mmt::core::load_shapeset(kModelSuite);
    OrderedJson problems = OrderedJson::array();
    for (const auto& entry : shapeset.operations) {
        for (const auto& shape : entry.shapes) {
            problems.push_back({{"op", entry.op}, {"shape", mmt::core::shape_to_document(shape)}});
        }
    }
    const OrderedJson request = {{"problems", problems}, {"top_k", 4}};
    const Answer listed = recommend(model.get(), request.dump());
    const Answer from_file = recommend(model.get(), R"({"shapeset": ")" + kModelSuite.string() + R"(", "top_k": 4})");
    ASSERT_EQ(listed.status, MMT_RANK_OK) << listed.error;
    EXPECT_EQ(without_timing(listed.text), without_timing(from_file.text));
    EXPECT_EQ(OrderedJson::parse(listed.text)["pruned"], false);
}

TEST_F(RankLibrary, BadRequestsAreOneLineOfBadInput) {
    const auto model = open_model();
    const std::pair<std::string, std::string> recommend_cases[] = {
        {"not json", "request: "},
        {"[1, 2]", "request: must be a JSON object"},
        {R"({"n": 64, "k": 64})", "--m: required (or give --shapeset)"},
        {R"({"m": 8, "n": 8, "k": 8, "top_k": 0})", "--top-k: must be at least 1"},
        {R"({"m": 8, "n": 8, "k": 8, "search_space": "ALL"})", "--search-space: unknown search space 'ALL'"},
        {R"({"m": 8, "n": 8, "k": "8"})", "request: 'k' must be an integer"},
        {R"({"m": 8, "n": 8, "k": 8, "topk": 3})", "request: unknown key 'topk'"},
        {R"({"problems": [], "m": 3})", "request: 'problems' and 'm' exclude each other"},
        {R"({"problems": [{"op": "mm", "shape": {"M": 1}}]})", "request: problems[0].shape: "},
        {R"({"problems": [{"op": "gemm", "shape": {}}]})", "operation 'gemm': unknown operation"},
    };
    for (const auto& [request, message] : recommend_cases) {
        const Answer a = recommend(model.get(), request);
        EXPECT_EQ(a.status, MMT_RANK_BAD_INPUT) << request;
        EXPECT_EQ(a.error.rfind(message, 0), 0u) << request << " -> " << a.error;
        EXPECT_EQ(a.error.find('\n'), std::string::npos);
    }
    const std::string shape = mmt::core::shape_to_document(mmt::core::make_shape(1, 64, 64, 64, "float16")).dump();
    const std::pair<std::string, std::string> decide_cases[] = {
        {R"({"op": "mm"})", "request: needs 'op' and 'shape'"},
        {R"({"op": "mm", "shape": )" + shape + R"(, "policy": "fast"})", "--policy: unknown policy 'fast'"},
        {R"({"op": "mm", "shape": )" + shape + R"(, "search_space": 3})", "request: 'search_space' must be a string"},
    };
    for (const auto& [request, message] : decide_cases) {
        const Answer a = decide(model.get(), request);
        EXPECT_EQ(a.status, MMT_RANK_BAD_INPUT) << request;
        EXPECT_EQ(a.error.rfind(message, 0), 0u) << request << " -> " << a.error;
    }
    char error[128];
    size_t needed = 7;
    EXPECT_EQ(mmt_rank_decide(model.get(), nullptr, nullptr, 0, &needed, error, sizeof error), MMT_RANK_BAD_INPUT);
    EXPECT_EQ(needed, 0u);
    EXPECT_EQ(mmt_rank_info(nullptr, nullptr, 0, nullptr, error, sizeof error), MMT_RANK_BAD_INPUT);
    EXPECT_EQ(std::string(error).rfind("model: NULL", 0), 0u);
}

// ---- decide ------------------------------------------------------------------------------------

// Every problem's decision is the entry list export-lut writes under that problem's own key.
TEST_F(RankLibrary, DecideAnswersExportLutsTableOfEveryProblem) {
    const auto model = open_model();
    std::size_t decided = 0;
    std::size_t shapes = 0;
    for (const auto& shapeset_path : {kModelSuite, kTransformerShapes}) {
        const auto shapeset = mmt::core::load_shapeset(shapeset_path);
        for (const auto& entry : shapeset.operations) shapes += entry.shapes.size();
        for (const auto& policy : mmt::model::policy_names()) {
            const auto table_path = dir / (policy + "_" + shapeset_path.filename().string());
            const auto run = cli({"export-lut", "--model", kModel.string(), "--shapeset", shapeset_path.string(),
                                  "--policy", policy, "--no-prune", "--output", table_path.string()});
            ASSERT_EQ(run.exit_code, 0) << run.err;
            const auto table = OrderedJson::parse(mmt::testing::slurp(table_path));
            for (const auto& entry : shapeset.operations) {
                for (const auto& shape : entry.shapes) {
                    const OrderedJson request = {
                        {"op", entry.op}, {"shape", mmt::core::shape_to_document(shape)}, {"policy", policy}};
                    const Answer a = decide(model.get(), request.dump());
                    ASSERT_EQ(a.status, MMT_RANK_OK) << a.error;
                    const auto doc = OrderedJson::parse(a.text);
                    const std::string key = mmt::model::inductor_lookup_key(entry.op, shape, "");
                    const std::string where = policy + " " + key;
                    ASSERT_TRUE(table.contains(key)) << where;
                    EXPECT_EQ(doc["entries"], table[key]) << where;
                    EXPECT_EQ(doc["policy"], policy);
                    ASSERT_EQ(doc["predicted_ms"].size(), doc["entries"].size()) << where;
                    for (const auto& ms : doc["predicted_ms"]) EXPECT_GT(ms.get<double>(), 0.0) << where;
                    std::size_t kernels = 0;
                    for (const auto& e : doc["entries"]) kernels += e["template_id"].get<std::string>().rfind("triton::", 0) == 0;
                    const std::string verdict = doc["decision"];
                    if (kernels == 0) EXPECT_EQ(verdict, "aten") << where;
                    else if (doc["entries"].size() == 1) EXPECT_EQ(verdict, "kernel") << where;
                    else EXPECT_EQ(verdict, "pair") << where;
                    EXPECT_GT(doc["kernel_ms"].get<double>(), 0.0);
                    EXPECT_GT(doc["vendor_ms"].get<double>(), 0.0);
                    ++decided;
                }
            }
        }
    }
    EXPECT_GT(shapes, 150u);
    EXPECT_EQ(decided, mmt::model::policy_names().size() * shapes);  // every problem of both shapesets, under every policy
}

TEST_F(RankLibrary, WithoutAPolicyDecideTakesExportLutsDefault) {
    const auto model = open_model();
    const std::string shape = mmt::core::shape_to_document(mmt::core::make_shape(1, 4096, 4096, 4096, "bfloat16")).dump();
    const auto implicit = OrderedJson::parse(decide(model.get(), R"({"op": "mm_nt", "shape": )" + shape + "}").text);
    const auto named = OrderedJson::parse(
        decide(model.get(), R"({"op": "mm_nt", "shape": )" + shape + R"(, "policy": ")" + mmt::model::kDefaultPolicy + R"("})").text);
    EXPECT_EQ(implicit, named);
    EXPECT_EQ(implicit["policy"], mmt::model::kDefaultPolicy);
}

// ---- threads -----------------------------------------------------------------------------------

TEST_F(RankLibrary, ConcurrentCallsOnOneModelGiveTheSameAnswers) {
    const auto model = open_model();
    const auto shapeset = mmt::core::load_shapeset(kTransformerShapes);
    std::vector<std::pair<bool, std::string>> requests;  // (decide, request)
    for (const auto& entry : shapeset.operations) {
        for (std::size_t i = 0; i < entry.shapes.size(); i += 3) {
            const OrderedJson shape = mmt::core::shape_to_document(entry.shapes[i]);
            for (const char* policy : {"graph", "isolated"}) {
                requests.push_back({true, OrderedJson{{"op", entry.op}, {"shape", shape}, {"policy", policy},
                                                      {"search_space", i % 2 ? "EXHAUSTIVE" : "DEFAULT"}}
                                              .dump()});
            }
            requests.push_back({false, OrderedJson{{"problems", {{{"op", entry.op}, {"shape", shape}}}}, {"top_k", 3}}.dump()});
        }
    }
    auto answer_of = [&](const std::pair<bool, std::string>& r) {
        const Answer a = r.first ? decide(model.get(), r.second) : recommend(model.get(), r.second);
        return a.status == MMT_RANK_OK ? without_timing(a.text) : "error: " + a.error;
    };
    std::vector<std::string> expected;
    for (const auto& r : requests) expected.push_back(answer_of(r));

    constexpr int kThreads = 8;
    std::vector<std::vector<std::string>> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            // Each thread walks the requests from its own starting point, so different spaces
            // and policies run at the same time.
            got[t].resize(requests.size());
            for (std::size_t i = 0; i < requests.size(); ++i) {
                const std::size_t at = (i + t * requests.size() / kThreads) % requests.size();
                got[t][at] = answer_of(requests[at]);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
        for (std::size_t i = 0; i < requests.size(); ++i) {
            EXPECT_EQ(got[t][i], expected[i]) << "thread " << t << ": " << requests[i].second;
        }
    }
}

}  // namespace
