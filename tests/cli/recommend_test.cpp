// `recommend` through the binary: K distinct configs sorted by prediction, shapesets,
// the table, bad input.

#include <cstdlib>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "tiny_model_fixture.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

class RecommendCli : public TinyModelCli<RecommendCli> {
public:
    static constexpr const char* kCommand = "recommend";
};

TEST_F(RecommendCli, ReturnsKDistinctConfigsSortedByPrediction) {
    const auto result = run({"--m", "200", "--n", "96", "--k", "64", "--top-k", "7", "--search-space",
                             "EXHAUSTIVE", "--no-prune", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto doc = nlohmann::json::parse(result.out);
    ASSERT_EQ(doc.at("problems").size(), 1u);
    const auto& problem = doc.at("problems").at(0);
    // The space and the vendor entry: the tiny model learned the aten_mm rows.
    EXPECT_EQ(problem.at("candidates"), 1876);
    EXPECT_EQ(problem.at("shape").at("M"), 200);
    const auto& top = problem.at("top_k");
    ASSERT_EQ(top.size(), 7u);
    std::set<std::tuple<int, int, int, int, int, int>> distinct;
    double previous = 0.0;
    for (const auto& entry : top) {
        const auto& c = entry.at("config");
        distinct.insert(std::make_tuple(c.at("block_m").get<int>(), c.at("block_n").get<int>(),
                                        c.at("block_k").get<int>(), c.at("group_m").get<int>(),
                                        c.at("num_stages").get<int>(), c.at("num_warps").get<int>()));
        const double predicted = entry.at("predicted_ms");
        EXPECT_GT(predicted, 0.0);
        EXPECT_GE(predicted, previous);
        previous = predicted;
        if (c.at("name") == "aten_mm") {
            EXPECT_EQ(c.at("block_m"), 1);  // the vendor entry has no tiles
            continue;
        }
        // Set for the problem as Inductor does: EVEN_K from K = 64.
        EXPECT_EQ(c.at("EVEN_K"), 64 % c.at("block_k").get<int>() == 0);
        EXPECT_EQ(c.at("name"), "mm_config");
    }
    EXPECT_EQ(distinct.size(), 7u);
}

TEST_F(RecommendCli, WithoutAModelUsesTheDefaultModel) {
    const auto models = *dir / "default_models";
    fs::create_directories(models);
    fs::copy_file(*model, models / "inductor_h200.pt", fs::copy_options::overwrite_existing);
    ::setenv("MMT_MODEL_DIR", models.c_str(), 1);
    const auto result = run_cli({"--device", "cpu", "recommend", "--m", "64", "--n", "64", "--k", "64",
                                 "--no-prune", "--json"},
                                *dir / "run");
    ::unsetenv("MMT_MODEL_DIR");

    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(nlohmann::json::parse(result.out).at("model"), (models / "inductor_h200.pt").string());
    EXPECT_NE(result.err.find("using the default model"), std::string::npos) << result.err;
}

TEST_F(RecommendCli, TopKLargerThanTheSpaceReturnsTheWholeSpace) {
    const auto result = run({"--m", "64", "--n", "64", "--k", "64", "--top-k", "50", "--no-prune", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto doc = nlohmann::json::parse(result.out);
    const auto& problem = doc.at("problems").at(0);
    EXPECT_EQ(problem.at("candidates"), 21);  // DEFAULT's 20 and aten_mm
    EXPECT_EQ(problem.at("top_k").size(), 21u);
}

TEST_F(RecommendCli, RanksEveryProblemOfAShapeset) {
    const auto result = run({"--shapeset", example_shapeset(), "--top-k", "2", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto doc = nlohmann::json::parse(result.out);
    ASSERT_EQ(doc.at("problems").size(), 5u);
    for (const auto& p : doc.at("problems")) {
        EXPECT_EQ(p.at("top_k").size(), 2u);
        EXPECT_GE(p.at("ranking_ms").get<double>(), 0.0);
    }
}

TEST_F(RecommendCli, PrintsATable) {
    const auto result = run({"--op", "bmm", "--batch", "4", "--m", "64", "--n", "32", "--k", "48",
                             "--layout", "tn", "--top-k", "3"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.out.find("bmm_tn M=64 N=32 K=48 B=4 float32"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("predicted_ms"), std::string::npos);
    EXPECT_NE(result.out.find("\n    3 "), std::string::npos) << result.out;
}

TEST_F(RecommendCli, BadInputGivesOneErrorLineAndExitTwo) {
    std::ofstream(*dir / "empty.json") << R"({"operations": {}})";
    const std::vector<std::vector<std::string>> cases{
        {"--shapeset", (*dir / "empty.json").string()},
        {"--m", "0", "--n", "8", "--k", "8"},
        {"--n", "8", "--k", "8"},
        {"--op", "conv", "--m", "8", "--n", "8", "--k", "8"},
        {"--batch", "2", "--m", "8", "--n", "8", "--k", "8"},
        {"--dtype", "float7", "--m", "8", "--n", "8", "--k", "8"},
        {"--search-space", "SMALL", "--m", "8", "--n", "8", "--k", "8"},
        {"--top-k", "0", "--m", "8", "--n", "8", "--k", "8"},
        {"--m", "8", "--n", "8", "--k", "8", "--shapeset", example_shapeset()},
    };
    for (const auto& args : cases) {
        const auto result = run(args);
        EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.err;
        EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
    }
    const auto missing = run_cli({"recommend", "--model", (*dir / "none.pt").string(), "--m", "8", "--n", "8",
                                  "--k", "8"},
                                 *dir / "run");
    EXPECT_EQ(missing.exit_code, 2);
}

}  // namespace
}  // namespace mmt::testing
