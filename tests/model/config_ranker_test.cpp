#include "matmul_toolkit/model/config_ranker.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <torch/types.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/recommend.hpp"
#include "predictor_impl.hpp"

namespace mmt::model {
namespace {

struct Problem {
    const char* op_key;
    core::MMShape shape;
};

const Problem kProblems[] = {{"mm", core::make_shape(1, 4096, 4096, 1024, "float16")},
                             {"addmm_nt", core::make_shape(1, 100, 200, 300, "bfloat16")},
                             {"bmm_tn", core::make_shape(12, 77, 129, 4097, "float32")},
                             {"mm", core::make_shape(1, 1, 11008, 4096, "float32")}};

/// A model with untrained but trained-looking weights (perturbed BatchNorm statistics) and
/// feature statistics of real rows, so predictions differ from config to config.
Predictor random_model(ModelType type) {
    ModelSpec spec;
    spec.type = type;
    spec.hidden_dims = {40, 24};
    spec.hidden_dim = 20;
    spec.num_layers = 2;
    torch::manual_seed(3);
    RuntimeNet net(spec, static_cast<int>(num_features()));
    net->initialise(-2.0);
    {
        torch::NoGradGuard no_grad;
        for (auto& [name, tensor] : net->state_dict()) {
            if (name.find("running_var") != std::string::npos) tensor.uniform_(0.5, 2.0);
            else if (name.find("running_mean") != std::string::npos) tensor.normal_(0.0, 0.5);
            else if (name.find("num_batches") == std::string::npos) tensor.add_(torch::randn_like(tensor) * 0.3);
        }
    }
    ModelInfo info;
    info.spec = spec;
    info.feature_names = feature_names();
    info.hardware_name = "NVIDIA H100 80GB HBM3";
    info.parallel_units = 132;
    std::vector<double> sum(num_features()), sum_sq(num_features());
    std::size_t rows = 0;
    for (const auto& p : kProblems) {
        for (const auto& c : collect::default_configs()) {
            const auto f = compute_features(p.op_key, p.shape, c, 132);
            for (std::size_t j = 0; j < f.size(); ++j) sum[j] += f[j], sum_sq[j] += double(f[j]) * f[j];
            ++rows;
        }
    }
    for (std::size_t j = 0; j < num_features(); ++j) {
        const double mean = sum[j] / rows;
        info.feature_mean.push_back(static_cast<float>(mean));
        info.feature_std.push_back(static_cast<float>(std::sqrt(std::max(sum_sq[j] / rows - mean * mean, 0.0)) + 0.5));
    }
    return Predictor(std::make_unique<Predictor::Impl>(std::move(info), std::move(net), c10::Device(c10::kCPU)));
}

// The ranker must give what the general path gives: candidate_configs (no backend), then
// the predictor on every candidate, then top_k_configs.
TEST(ConfigRanker, AgreesWithCandidateConfigsAndThePredictor) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        const auto predictor = random_model(type);
        for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
            for (bool tf32 : {false, true}) {
                ConfigRanker ranker(predictor.inference(), space, tf32);
                CandidateOptions options;
                options.space = space;
                options.allow_tf32 = tf32;
                for (const auto& p : kProblems) {
                    const std::string where = to_string(type) + " " + collect::search_space_name(space) + " " +
                                              p.op_key + (tf32 ? " tf32" : "");
                    const auto candidates = candidate_configs(p.op_key, p.shape, options);
                    ASSERT_EQ(ranker.size(), candidates.size()) << where;
                    const auto expected = predictor.predict_log_ms(p.op_key, p.shape, candidates);
                    const auto& predicted = ranker.predict_log_ms(p.op_key, p.shape);
                    ASSERT_EQ(predicted.size(), expected.size());
                    for (std::size_t i = 0; i < expected.size(); ++i) {
                        ASSERT_NEAR(predicted[i], expected[i], 2e-4) << where << " config " << i;
                    }

                    const auto reference = top_k_configs(predictor.inference(), p.op_key, p.shape, candidates, 10);
                    const auto top = ranker.top_k(p.op_key, p.shape, 10);
                    ASSERT_EQ(top.size(), reference.size()) << where;
                    for (std::size_t i = 0; i < top.size(); ++i) {
                        EXPECT_NEAR(std::log(top[i].predicted_ms), std::log(reference[i].predicted_ms), 2e-4) << where;
                        if (i > 0) EXPECT_LE(top[i - 1].predicted_ms, top[i].predicted_ms) << where;
                        // Another config only where two predictions tie within float rounding.
                        if (top[i].config != reference[i].config) {
                            EXPECT_NEAR(top[i].predicted_ms, reference[i].predicted_ms, 1e-4 * reference[i].predicted_ms)
                                << where << " rank " << i;
                        }
                        // Set for the problem as candidate_configs sets it.
                        EXPECT_EQ(top[i].config.name, collect::config_name(core::parse_op_key(p.op_key).first));
                        EXPECT_EQ(top[i].config.even_k, p.shape.K % top[i].config.block_k == 0);
                        EXPECT_EQ(top[i].config.allow_tf32, tf32 && p.shape.M_dtype == "float32");
                        EXPECT_EQ(top[i].config.acc_type, candidates.front().acc_type);
                    }
                }
            }
        }
    }
}

TEST(ConfigRanker, DropsRepeatsAndReturnsTheWholeSpaceWhenKIsLarger) {
    const auto predictor = random_model(ModelType::base);
    const auto once = collect::default_configs();
    const std::size_t distinct = once.size();
    auto configs = once;
    configs.insert(configs.end(), once.begin(), once.end());
    ConfigRanker ranker(predictor.inference(), configs);
    EXPECT_EQ(ranker.size(), distinct);
    const auto top = ranker.top_k("mm", core::make_shape(1, 512, 512, 512, "float16"), 1000);
    ASSERT_EQ(top.size(), distinct);
    std::set<std::tuple<int, int, int, int, int>> seen;
    for (const auto& r : top) seen.emplace(r.config.block_m, r.config.block_n, r.config.block_k, r.config.num_stages, r.config.num_warps);
    EXPECT_EQ(seen.size(), distinct);
    EXPECT_TRUE(ranker.top_k("mm", core::make_shape(1, 512, 512, 512, "float16"), 0).empty());
}

TEST(ConfigRanker, BadConfigsAndProblemsAreInputErrors) {
    const auto predictor = random_model(ModelType::base);
    auto bad = collect::default_configs();
    bad[3].num_warps = 0;
    EXPECT_THROW(ConfigRanker(predictor.inference(), bad), core::InputError);
    ConfigRanker ranker(predictor.inference(), collect::SearchSpace::default_space);
    EXPECT_THROW(ranker.top_k("mm", core::make_shape(1, 0, 8, 8, "float16"), 5), core::InputError);
    EXPECT_THROW(ranker.top_k("conv", core::make_shape(1, 8, 8, 8, "float16"), 5), core::InputError);
    // Still usable after a refused problem.
    EXPECT_EQ(ranker.top_k("mm", core::make_shape(1, 8, 8, 8, "float16"), 5).size(), 5u);
}

// candidate_options_for a GPU model: the configs Inductor would run for the shape, none that
// overflows shared memory, and ATen when the model learned it.
TEST(CandidateConfigs, FollowInductorsScalingTheSharedMemoryLimitAndTheModelsVendorRows) {
    ModelInfo info;
    info.hardware_name = "NVIDIA H200";
    CandidateOptions plain;
    const auto options = candidate_options_for(info, plain);
    EXPECT_TRUE(options.inductor_scaling);
    EXPECT_EQ(options.shared_memory_bytes, 232448);
    EXPECT_FALSE(options.with_reference);

    for (const auto& c : candidate_configs("mm", core::make_shape(1, 1, 4096, 4096, "bfloat16"), options)) {
        EXPECT_EQ(c.block_m, 16) << collect::describe_config(c);
    }
    // float32 128x128x64 with 5 stages needs 320 KiB: never offered.
    const auto fp32 = candidate_configs("mm", core::make_shape(1, 4096, 4096, 4096, "float32"), options);
    EXPECT_LT(fp32.size(), collect::default_configs().size());
    for (const auto& c : fp32) EXPECT_LE(collect::inductor_shared_memory_bytes(c, 4), 232448);

    info.vendor_rows = true;
    const auto with_aten = candidate_configs("addmm", core::make_shape(1, 512, 512, 512, "float16"),
                                             candidate_options_for(info, plain));
    ASSERT_FALSE(with_aten.empty());
    EXPECT_EQ(with_aten.back().name, "aten_addmm");

    info.hardware_name = "AMD EPYC 7B13";  // a CPU model: its tiles as listed
    EXPECT_FALSE(candidate_options_for(info, plain).inductor_scaling);
    EXPECT_EQ(candidate_options_for(info, plain).shared_memory_bytes, 0);
}

// CandidateRanker takes the prepared ranker only where it ranks exactly the candidates.
TEST(CandidateRanker, AgreesWithCandidateConfigsOnEveryProblem) {
    const auto predictor = random_model(ModelType::base);
    for (bool vendor : {false, true}) {
        for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
            ModelInfo info = predictor.info();
            info.vendor_rows = vendor;
            CandidateOptions options;
            options.space = space;
            options = candidate_options_for(info, options);
            CandidateRanker ranker(predictor.inference(), options);
            // Twice: the second round ranks with the rankers the first one prepared.
            for (const auto& p : {kProblems[0], kProblems[1], kProblems[2], kProblems[3], kProblems[1], kProblems[3]}) {
                const auto candidates = candidate_configs(p.op_key, p.shape, options);
                // The whole list too: the vendor entry then has its place somewhere in it
                // (export-lut --aten-from asks for every candidate with the largest k).
                for (const std::size_t k : {std::size_t{8}, candidates.size(), std::numeric_limits<std::size_t>::max()}) {
                    const std::string where = collect::search_space_name(space) + " " + p.op_key + " M=" +
                                              std::to_string(p.shape.M) + (vendor ? " vendor" : "") + " k=" +
                                              std::to_string(k);
                    const auto expected = top_k_configs(predictor.inference(), p.op_key, p.shape, candidates, k);
                    std::size_t ranked = 0;
                    const auto top = ranker.top_k(p.op_key, p.shape, k, &ranked);
                    EXPECT_EQ(ranked, candidates.size()) << where;
                    ASSERT_EQ(top.size(), expected.size()) << where;
                    for (std::size_t i = 0; i < top.size(); ++i) {
                        EXPECT_NEAR(std::log(top[i].predicted_ms), std::log(expected[i].predicted_ms), 2e-4) << where;
                        if (top[i].config != expected[i].config) {
                            EXPECT_NEAR(top[i].predicted_ms, expected[i].predicted_ms, 1e-4 * expected[i].predicted_ms)
                                << where << " rank " << i;
                        }
                    }
                    const bool has_vendor = std::any_of(top.begin(), top.end(), [](const RankedConfig& r) {
                        return collect::is_reference_config(r.config);
                    });
                    if (k >= candidates.size()) EXPECT_EQ(has_vendor, vendor) << where;
                }
            }
        }
    }
}

// The ranking cut at a margin is the beginning of the whole ranking: everything within the
// factor of the best kernel config, at least the count asked for, the vendor entry in place.
TEST(CandidateRanker, TopWithinIsTheBeginningOfTheWholeRanking) {
    const auto predictor = random_model(ModelType::base);
    ModelInfo info = predictor.info();
    info.vendor_rows = true;
    for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
        CandidateOptions options;
        options.space = space;
        options = candidate_options_for(info, options);
        CandidateRanker ranker(predictor.inference(), options);
        for (const auto& p : kProblems) {
            const auto whole = ranker.top_k(p.op_key, p.shape, std::numeric_limits<std::size_t>::max());
            for (const auto& [factor, at_least] : {std::pair{1.0, std::size_t{1}}, std::pair{1.05, std::size_t{2}},
                                                   std::pair{1.1025, std::size_t{1}}, std::pair{3.0, std::size_t{40}}}) {
                const std::string where = collect::search_space_name(space) + " " + p.op_key + " factor " +
                                          std::to_string(factor);
                const auto cut = ranker.top_within(p.op_key, p.shape, factor, at_least);
                ASSERT_LE(cut.size(), whole.size()) << where;
                // The vendor entry is always there; the kernel configs are a prefix of the whole list.
                std::vector<RankedConfig> kernels, whole_kernels;
                for (const auto& r : cut) {
                    if (!collect::is_reference_config(r.config)) kernels.push_back(r);
                }
                for (const auto& r : whole) {
                    if (!collect::is_reference_config(r.config)) whole_kernels.push_back(r);
                }
                EXPECT_EQ(cut.size(), kernels.size() + 1) << where;
                ASSERT_GE(kernels.size(), std::min(at_least, whole_kernels.size())) << where;
                for (std::size_t i = 0; i < kernels.size(); ++i) {
                    EXPECT_EQ(kernels[i].config, whole_kernels[i].config) << where << " rank " << i;
                    EXPECT_EQ(kernels[i].predicted_ms, whole_kernels[i].predicted_ms) << where;
                }
                const double limit = whole_kernels.front().predicted_ms * factor;
                for (std::size_t i = kernels.size(); i < whole_kernels.size(); ++i) {
                    EXPECT_GT(whole_kernels[i].predicted_ms, limit) << where << " left out rank " << i;
                }
                // In the same place among them as in the whole ranking.
                const auto vendor_at = [](const std::vector<RankedConfig>& r) {
                    return std::find_if(r.begin(), r.end(), [](const RankedConfig& x) {
                               return collect::is_reference_config(x.config);
                           }) - r.begin();
                };
                if (vendor_at(whole) <= static_cast<std::ptrdiff_t>(kernels.size())) {
                    EXPECT_EQ(vendor_at(cut), vendor_at(whole)) << where;
                } else {
                    EXPECT_EQ(vendor_at(cut), static_cast<std::ptrdiff_t>(kernels.size())) << where;
                }
            }
        }
    }
}

// Small sizes each scale the space their own way: the rankers prepared for them stay few,
// and a ranker evicted and prepared again ranks as before.
TEST(CandidateRanker, KeepsFewPreparedRankersOverManySmallShapes) {
    const auto predictor = random_model(ModelType::base);
    CandidateOptions options;
    options.space = collect::SearchSpace::exhaustive;
    options = candidate_options_for(predictor.info(), options);
    ASSERT_TRUE(options.inductor_scaling);
    CandidateRanker ranker(predictor.inference(), options);
    EXPECT_EQ(ranker.prepared_count(), 1u);  // large problems' ranker, prepared up front
    std::vector<core::MMShape> shapes;
    for (std::int64_t m : {1, 17, 33, 65}) {
        for (std::int64_t n : {5, 20, 40, 100}) {
            for (std::int64_t k : {9, 30, 60}) shapes.push_back(core::make_shape(1, m, n, k, "bfloat16"));
        }
    }
    ASSERT_GT(shapes.size(), CandidateRanker::kMaxPrepared);
    for (int round = 0; round < 2; ++round) {
        for (const auto& shape : shapes) {
            const auto candidates = candidate_configs("mm", shape, options);
            const auto expected = top_k_configs(predictor.inference(), "mm", shape, candidates, 3);
            std::size_t ranked = 0;
            const auto top = ranker.top_k("mm", shape, 3, &ranked);
            const std::string where = "M=" + std::to_string(shape.M) + " N=" + std::to_string(shape.N) +
                                      " K=" + std::to_string(shape.K) + " round " + std::to_string(round);
            EXPECT_EQ(ranked, candidates.size()) << where;
            ASSERT_EQ(top.size(), expected.size()) << where;
            for (std::size_t i = 0; i < top.size(); ++i) {
                EXPECT_NEAR(std::log(top[i].predicted_ms), std::log(expected[i].predicted_ms), 2e-4) << where;
            }
            EXPECT_LE(ranker.prepared_count(), CandidateRanker::kMaxPrepared) << where;
        }
    }
    EXPECT_EQ(ranker.prepared_count(), CandidateRanker::kMaxPrepared);
}

}  // namespace
}  // namespace mmt::model
