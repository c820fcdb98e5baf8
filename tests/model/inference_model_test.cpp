#include "matmul_toolkit/model/inference_model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "checkpoint_reader.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/dataset_stats.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/recommend.hpp"
#include "matmul_toolkit/model/trainer.hpp"
#include "predictor_impl.hpp"
#include "synthetic_data.hpp"
#include "torch_archive.hpp"
#include "torch_archive_check.hpp"
#include "trained_looking_net.hpp"

namespace mmt::model {
namespace {

namespace fs = std::filesystem;

const fs::path kShippedModel = fs::path(MMT_SOURCE_DIR) / "data/models/inductor_h200.pt";
const fs::path kCorpus = fs::path(MMT_SOURCE_DIR) / "tests/fuzz/corpus/checkpoint";

struct Problem {
    const char* op_key;
    core::MMShape shape;
};

// Aligned and misaligned sizes, every op and dtype, a GEMV, a batch.
const Problem kProblems[] = {{"mm", core::make_shape(1, 4096, 4096, 1024, "bfloat16")},
                             {"mm_nt", core::make_shape(1, 1, 11008, 4096, "bfloat16")},
                             {"addmm_nt", core::make_shape(1, 100, 200, 300, "float16")},
                             {"addmm", core::make_shape(1, 8192, 1024, 4096, "float16")},
                             {"bmm_tn", core::make_shape(12, 77, 129, 4097, "float32")},
                             {"bmm", core::make_shape(32, 512, 64, 512, "bfloat16")},
                             {"mm_tt", core::make_shape(1, 3, 5, 7, "float32")}};

/// The model's own reading of a checkpoint, independent of ours: torch::pickle_load of the
/// file, its state dict copied into a RuntimeNet, the module's eval-mode forward pass (real
/// BatchNorm layers, nothing folded), standardised by (x - mean) / std.
class LibTorchReference {
public:
    explicit LibTorchReference(const fs::path& path) {
        const std::string bytes = core::read_file(path);
        (void)check_torch_archive(bytes, path.string());  // what LibTorch may be trusted with
        const auto root = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
        auto at = [&](const char* key) { return root.at(c10::IValue(std::string(key))); };
        ModelSpec spec;
        spec.type = parse_model_type(at("model_type").toStringRef());
        if (spec.type == ModelType::base) {
            spec.hidden_dims.clear();
            for (const auto& d : at("hidden_dims").toListRef()) spec.hidden_dims.push_back(static_cast<int>(d.toInt()));
        } else {
            spec.hidden_dim = static_cast<int>(at("hidden_dim").toInt());
            spec.num_layers = static_cast<int>(at("num_layers").toInt());
        }
        m_net = RuntimeNet(spec, static_cast<int>(num_features()));
        const auto state = at("model_state_dict").toGenericDict();
        torch::NoGradGuard no_grad;
        for (auto& [name, tensor] : m_net->state_dict()) tensor.copy_(state.at(c10::IValue(name)).toTensor());
        m_net->eval();
        m_mean = at("feature_mean").toTensor().to(torch::kFloat32);
        m_std = at("feature_std").toTensor().to(torch::kFloat32);
        m_units = static_cast<int>(at("parallel_units").toInt());
    }

    std::vector<double> predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                       const std::vector<core::GemmConfig>& configs) {
        std::vector<float> rows;
        for (const auto& c : configs) {
            const auto f = compute_features(op_key, shape, c, m_units);
            rows.insert(rows.end(), f.begin(), f.end());
        }
        torch::NoGradGuard no_grad;
        const auto x = torch::from_blob(rows.data(), {static_cast<std::int64_t>(configs.size()),
                                                      static_cast<std::int64_t>(num_features())},
                                        torch::kFloat32);
        const auto out = m_net->forward((x - m_mean) / m_std).reshape({-1}).contiguous();
        return std::vector<double>(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
    }

private:
    RuntimeNet m_net{nullptr};
    at::Tensor m_mean, m_std;
    int m_units = 1;
};

/// Every candidate of both spaces on every problem, the vendor entry included, and the
/// whole EXHAUSTIVE grid unscaled.
std::vector<std::pair<const Problem*, std::vector<core::GemmConfig>>> every_candidate(const ModelInfo& info) {
    std::vector<std::pair<const Problem*, std::vector<core::GemmConfig>>> out;
    for (const auto& p : kProblems) {
        collect::Problem problem;
        std::tie(problem.op, problem.layout) = core::parse_op_key(p.op_key);
        problem.shape = p.shape;
        for (auto space : {collect::SearchSpace::default_space, collect::SearchSpace::exhaustive}) {
            CandidateOptions options;
            options.space = space;
            auto candidates = candidate_configs(p.op_key, p.shape, candidate_options_for(info, options));
            candidates.push_back(collect::reference_config(problem));
            out.emplace_back(&p, std::move(candidates));
        }
        out.emplace_back(&p, collect::specialize_configs(collect::exhaustive_configs(), problem, true));
    }
    return out;
}

/// Within 1e-5 of the reference, relative to its size (ln ms is often near 0).
void expect_close(const std::vector<double>& ours, const std::vector<double>& reference, const std::string& what) {
    ASSERT_EQ(ours.size(), reference.size()) << what;
    double worst = 0.0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
        worst = std::max(worst, std::abs(ours[i] - reference[i]) / std::max(1.0, std::abs(reference[i])));
    }
    EXPECT_LT(worst, 1e-5) << what << " (worst relative difference " << worst << ")";
}

/// Our model against LibTorch's reading of the same file, on every candidate.
void expect_predictions_match_libtorch(const fs::path& path) {
    const InferenceModel model = InferenceModel::load(path);
    LibTorchReference reference(path);
    std::size_t rows = 0;
    for (const auto& [problem, configs] : every_candidate(model.info())) {
        const std::string what = path.filename().string() + " " + problem->op_key + " " + core::shape_label(problem->shape);
        expect_close(model.predict_log_ms(problem->op_key, problem->shape, configs),
                     reference.predict_log_ms(problem->op_key, problem->shape, configs), what);
        rows += configs.size();
    }
    EXPECT_GT(rows, 16384u);
}

class InferenceModelFiles : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("mmt_inference_model_test_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }

    /// A trained-looking network (BatchNorm statistics far from the identity) saved as a checkpoint.
    fs::path save_trained_looking(ModelType type, std::vector<int> hidden_dims, int hidden_dim, std::uint64_t seed) {
        RuntimeNet net = test::trained_looking_net(type, std::move(hidden_dims), hidden_dim,
                                                   static_cast<int>(num_features()), seed, -1.0);
        ModelInfo info;
        info.spec = net->spec();
        info.feature_names = feature_names();
        info.hardware_name = "NVIDIA H200";
        info.parallel_units = 132;
        for (std::size_t j = 0; j < num_features(); ++j) {
            info.feature_mean.push_back(0.1f * static_cast<float>(j % 7));
            info.feature_std.push_back(0.5f + 0.25f * static_cast<float>(j % 5));
        }
        const Predictor predictor(std::make_unique<Predictor::Impl>(info, net, c10::Device(c10::kCPU)));
        const auto path = dir / ("net_" + to_string(type) + "_" + std::to_string(seed) + ".pt");
        predictor.save(path);
        return path;
    }

    static Predictor train(ModelType type, int ensemble) {
        TrainOptions options;
        options.model.type = type;
        options.model.hidden_dims = {32, 16};
        options.model.hidden_dim = 16;
        options.model.num_layers = 2;
        options.num_epochs = 2;
        options.ensemble = ensemble;
        options.seed = 5;
        return train_model(testing::synthetic_dataset(12, 8), "synthetic", options).model;
    }

    fs::path dir;
};

TEST(InferenceModel, TheShippedModelPredictsWhatLibTorchComputes) {
    expect_predictions_match_libtorch(kShippedModel);
}

TEST_F(InferenceModelFiles, TrainedLookingNetworksPredictWhatLibTorchComputes) {
    expect_predictions_match_libtorch(save_trained_looking(ModelType::base, {48, 20}, 0, 11));
    expect_predictions_match_libtorch(save_trained_looking(ModelType::base, {80, 40, 16}, 0, 12));
    expect_predictions_match_libtorch(save_trained_looking(ModelType::deep, {}, 24, 13));
}

TEST_F(InferenceModelFiles, TrainedModelsPredictWhatTheirPredictorAndLibTorchDo) {
    for (auto [type, ensemble] : {std::pair{ModelType::base, 1}, std::pair{ModelType::deep, 1}, std::pair{ModelType::base, 3}}) {
        const Predictor trained = train(type, ensemble);
        const auto path = dir / ("trained_" + to_string(type) + std::to_string(ensemble) + ".pt");
        trained.save(path);
        expect_predictions_match_libtorch(path);

        // The Predictor predicts through the same folded arrays: exactly what the file gives,
        // and, through LibTorch's batched path (more rows than its float-array path takes),
        // the same up to float rounding.
        const InferenceModel loaded = InferenceModel::load(path);
        std::vector<PredictionQuery> queries;
        for (const auto& [problem, configs] : every_candidate(loaded.info())) {
            const std::string what = to_string(type) + " x" + std::to_string(ensemble) + " " + problem->op_key;
            const auto ours = loaded.predict_log_ms(problem->op_key, problem->shape, configs);
            EXPECT_EQ(ours, trained.predict_log_ms(problem->op_key, problem->shape, configs)) << what;
            for (const auto& c : configs) queries.push_back({problem->op_key, problem->shape, c, 0});
        }
        ASSERT_GT(queries.size(), Predictor::Impl::kDenseRows);
        expect_close(loaded.predict_log_ms(queries), trained.predict_log_ms(queries), "batched " + to_string(type));
    }
}

TEST_F(InferenceModelFiles, ReadsWhatThePredictorRecords) {
    const Predictor trained = train(ModelType::base, 1);
    const auto path = dir / "model.pt";
    trained.save(path);
    const auto& expected = trained.info();
    const InferenceModel loaded = InferenceModel::load(path);
    const auto& info = loaded.info();
    EXPECT_EQ(info.spec.hidden_dims, expected.spec.hidden_dims);
    EXPECT_EQ(info.feature_names, feature_names());
    EXPECT_EQ(info.feature_mean, expected.feature_mean);
    EXPECT_EQ(info.feature_std, expected.feature_std);
    EXPECT_EQ(info.hardware_name, expected.hardware_name);
    EXPECT_EQ(info.parallel_units, expected.parallel_units);
    EXPECT_EQ(info.seed, "5");
    EXPECT_EQ(info.best_epoch, expected.best_epoch);
    EXPECT_DOUBLE_EQ(info.best_validation_loss, expected.best_validation_loss);
    EXPECT_EQ(info.train_rows, expected.train_rows);
    EXPECT_EQ(info.ensemble, 1);
}

// The reader's state dict layout is the network's: the same names, shapes and order.
TEST(ExpectedStateDict, IsTheNetworksStateDict) {
    for (const auto& spec_of : {std::pair{ModelType::base, 2}, std::pair{ModelType::base, 3}, std::pair{ModelType::deep, 1},
                                std::pair{ModelType::deep, 3}}) {
        ModelSpec spec;
        spec.type = spec_of.first;
        spec.hidden_dims = spec_of.second == 2 ? std::vector<int>{16, 8} : std::vector<int>{24, 12, 6};
        spec.hidden_dim = 10;
        spec.num_layers = spec_of.second;
        RuntimeNet net(spec, 17);
        std::vector<StateEntry> actual;
        for (const auto& [name, tensor] : net->state_dict()) {
            actual.push_back({name, std::vector<std::int64_t>(tensor.sizes().begin(), tensor.sizes().end())});
        }
        EXPECT_EQ(expected_state_dict(spec, 17), actual) << spec.describe();
    }
}

// Every value of the shipped model and the seed checkpoints (one saved as Python lays a
// dict out) reads as LibTorch's unpickler reads it.
TEST(TorchArchiveReader, ReadsEveryValueAsLibTorchDoes) {
    std::vector<fs::path> files{kShippedModel};
    for (const auto& entry : fs::directory_iterator(kCorpus)) files.push_back(entry.path());
    for (const auto& path : files) {
        std::string bytes = core::read_file(path);
        const auto theirs = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
        const TorchArchive ours = read_torch_archive(std::move(bytes), path.string());
        std::size_t compared = 0;
        std::function<void(const ArchiveValue&, const c10::IValue&, const std::string&)> same =
            [&](const ArchiveValue& a, const c10::IValue& b, const std::string& where) {
                ++compared;
                switch (a.kind) {
                    case ArchiveValue::Kind::none: EXPECT_TRUE(b.isNone()) << where; break;
                    case ArchiveValue::Kind::boolean: EXPECT_EQ(b.toBool(), a.integer != 0) << where; break;
                    case ArchiveValue::Kind::integer: EXPECT_EQ(b.toInt(), a.integer) << where; break;
                    case ArchiveValue::Kind::real: EXPECT_EQ(b.toDouble(), a.real) << where; break;
                    case ArchiveValue::Kind::string: EXPECT_EQ(b.toStringRef(), std::string(a.text)) << where; break;
                    case ArchiveValue::Kind::list: {
                        const auto list = b.toListRef();
                        ASSERT_EQ(list.size(), a.items->size()) << where;
                        for (std::size_t i = 0; i < list.size(); ++i) same((*a.items)[i], list[i], where + "[" + std::to_string(i) + "]");
                        break;
                    }
                    case ArchiveValue::Kind::dict: {
                        const auto dict = b.toGenericDict();
                        ASSERT_EQ(dict.size(), a.entries->size()) << where;
                        for (const auto& [key, value] : *a.entries) {
                            same(value, dict.at(c10::IValue(std::string(key.text))), where + "." + std::string(key.text));
                        }
                        break;
                    }
                    case ArchiveValue::Kind::tensor: {
                        const auto t = b.toTensor().to(torch::kFloat64).contiguous();
                        EXPECT_EQ(std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()), a.tensor->sizes) << where;
                        EXPECT_EQ(std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()),
                                  a.tensor->values())
                            << where;
                        break;
                    }
                    default: ADD_FAILURE() << where << ": kind " << static_cast<int>(a.kind);
                }
            };
        same(ours.root, theirs, path.filename().string());
        EXPECT_GT(compared, 20u) << path;
    }
}

// Sizes, strides and an offset over a storage, in every element type a checkpoint may use.
TEST(TorchArchiveReader, TensorsReadThroughTheirStridesInEveryElementType) {
    auto values_of = [](const at::Tensor& t) {
        auto root = PyValue::make_dict();
        root.set("t", PyValue::from_tensor(t));
        const TorchArchive archive = read_torch_archive(write_torch_archive(root), "x.pt");
        return archive.root.find("t")->tensor->values();
    };
    const auto base = torch::arange(24, torch::kFloat64).reshape({2, 3, 4}) * 0.5 - 3.0;
    for (auto type : {torch::kFloat32, torch::kFloat64, torch::kInt64, torch::kInt32}) {
        const auto t = base.to(type);
        const auto expected = t.to(torch::kFloat64).contiguous();
        EXPECT_EQ(values_of(t),
                  std::vector<double>(expected.data_ptr<double>(), expected.data_ptr<double>() + expected.numel()));
    }
    // A transposed view and a slice: the writer stores them contiguous, so build the layout
    // by hand on the reader's type.
    ArchiveTensor strided;
    const std::vector<float> storage{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    strided.storage = std::string_view(reinterpret_cast<const char*>(storage.data()), storage.size() * sizeof(float));
    strided.sizes = {2, 3};
    strided.strides = {1, 3};
    strided.storage_offset = 1;
    EXPECT_EQ(strided.values(), (std::vector<double>{1, 4, 7, 2, 5, 8}));
    // float16 and bfloat16: 1.5, -2 and the smallest float16 subnormal (2^-24).
    const std::uint16_t halves[] = {0x3e00, 0xc000, 0x0001};
    ArchiveTensor half;
    half.type = StorageType::float16;
    half.storage = std::string_view(reinterpret_cast<const char*>(halves), sizeof halves);
    half.sizes = {3};
    half.strides = {1};
    EXPECT_EQ(half.values(), (std::vector<double>{1.5, -2.0, std::ldexp(1.0, -24)}));
    const std::uint16_t brains[] = {0x3fc0, 0xc000};
    ArchiveTensor brain;
    brain.type = StorageType::bfloat16;
    brain.storage = std::string_view(reinterpret_cast<const char*>(brains), sizeof brains);
    brain.sizes = {2};
    brain.strides = {1};
    EXPECT_EQ(brain.values(), (std::vector<double>{1.5, -2.0}));
}

TEST_F(InferenceModelFiles, FilesThatAreNoModelAreClearErrorsNamingTheFile) {
    auto refusal = [](const fs::path& path) -> std::string {
        try {
            (void)InferenceModel::load(path);
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), path.string());
            return e.what();
        }
        ADD_FAILURE() << path << " loaded";
        return "";
    };
    EXPECT_NE(refusal(dir / "absent.pt").find("no such file"), std::string::npos);
    const auto dataset = dir / "dataset.pt";
    fs::copy_file(fs::path(MMT_SOURCE_DIR) / "data/datasets/sample_cpu.json", dataset);
    EXPECT_NE(refusal(dataset).find("not a matmul_toolkit checkpoint: not a zip archive"), std::string::npos);
    const std::string shipped = core::read_file(kShippedModel);
    const auto truncated = dir / "truncated.pt";
    core::write_file_atomically(truncated, shipped.substr(0, shipped.size() / 2));
    EXPECT_NE(refusal(truncated).find("truncated?"), std::string::npos);

    // A checkpoint of another architecture than it says it is.
    const Predictor trained = train(ModelType::base, 1);
    trained.impl().info.spec.hidden_dims = {32, 8};
    const auto lying = dir / "lying.pt";
    trained.save(lying);
    EXPECT_NE(refusal(lying).find("model_state_dict['model.4.weight'] has shape [16, 32], the architecture needs [8, 32]"),
              std::string::npos);
}

}  // namespace
}  // namespace mmt::model
