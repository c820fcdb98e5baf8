#include "matmul_toolkit/model/predictor.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/trainer.hpp"
#include "predictor_impl.hpp"
#include "synthetic_data.hpp"
#include "torch_archive.hpp"

namespace mmt::model {
namespace {

namespace fs = std::filesystem;

class PredictorFiles : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() /
              ("mmt_predictor_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    void TearDown() override { fs::remove_all(dir); }

    static TrainResult train(ModelType type) {
        TrainOptions options;
        options.model.type = type;
        options.model.hidden_dims = {32, 16};
        options.model.hidden_dim = 16;
        options.model.num_layers = 2;
        options.num_epochs = 2;
        options.seed = 3;
        return train_model(testing::synthetic_dataset(12, 8), "synthetic", options);
    }

    fs::path dir;
};

std::vector<core::GemmConfig> some_configs() { return testing::synthetic_configs(); }

TEST_F(PredictorFiles, SaveThenLoadGivesIdenticalPredictions) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        const auto trained = train(type);
        const auto path = dir / ("model_" + to_string(type) + ".pt");
        trained.model.save(path);
        const auto loaded = Predictor::load(path);

        const auto shape = core::make_shape(1, 1000, 333, 4096, "float16");
        const auto before = trained.model.predict_log_ms("mm", shape, some_configs());
        const auto after = loaded.predict_log_ms("mm", shape, some_configs());
        ASSERT_EQ(before.size(), after.size());
        for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], after[i]) << to_string(type);

        const auto& info = loaded.info();
        EXPECT_EQ(info.spec.type, type);
        EXPECT_EQ(info.feature_names, feature_names());
        EXPECT_EQ(info.feature_mean, trained.model.info().feature_mean);
        EXPECT_EQ(info.feature_std, trained.model.info().feature_std);
        EXPECT_EQ(info.hardware_name, testing::kSyntheticGpu);
        EXPECT_EQ(info.parallel_units, 132);
        EXPECT_EQ(info.best_epoch, trained.best_epoch);
        EXPECT_EQ(info.seed, "3");
        EXPECT_FALSE(info.vendor_rows);
        if (type == ModelType::base) EXPECT_EQ(info.spec.hidden_dims, (std::vector<int>{32, 16}));
        if (type == ModelType::deep) EXPECT_EQ(info.spec.num_layers, 2);
    }
}

TEST_F(PredictorFiles, AModelTrainedOnVendorRowsSaysSo) {
    TrainOptions options;
    options.num_epochs = 1;
    options.vendor_rows = true;
    const auto trained = train_model(with_reference_rows(group_problems(testing::synthetic_dataset(12, 8), "synthetic")),
                                     options);
    EXPECT_TRUE(trained.model.info().vendor_rows);
    const auto path = dir / "vendor.pt";
    trained.model.save(path);
    EXPECT_TRUE(Predictor::load(path).info().vendor_rows);
}

TEST_F(PredictorFiles, BatchPathsAgree) {
    const auto trained = train(ModelType::base);
    const auto shape = core::make_shape(1, 512, 512, 512, "float16");
    const auto configs = some_configs();
    const auto batch = trained.model.predict_log_ms("mm", shape, configs);
    std::vector<PredictionQuery> queries;
    for (const auto& c : configs) queries.push_back({"mm", shape, c, 0});
    const auto mixed = trained.model.predict_log_ms(queries);
    const auto ms = trained.model.predict_ms("mm", shape, configs);
    for (std::size_t i = 0; i < configs.size(); ++i) {
        EXPECT_EQ(batch[i], mixed[i]);
        EXPECT_DOUBLE_EQ(ms[i], std::exp(batch[i]));
    }
    const auto order = trained.model.rank("mm", shape, configs);
    ASSERT_EQ(order.size(), configs.size());
    for (std::size_t i = 1; i < order.size(); ++i) EXPECT_LE(batch[order[i - 1]], batch[order[i]]);

    // Small forward passes give the same answer as one big one.
    Predictor& model = const_cast<Predictor&>(trained.model);
    model.set_batch_size(5);
    const auto chunked = model.predict_log_ms("mm", shape, configs);
    for (std::size_t i = 0; i < configs.size(); ++i) EXPECT_NEAR(chunked[i], batch[i], 1e-5);
}

TEST_F(PredictorFiles, CheckpointWithOtherFeaturesIsRefused) {
    auto trained = train(ModelType::base);
    auto& impl = trained.model.impl();
    impl.info.feature_names[3] = "a_is_transposed";
    const auto path = dir / "other_features.pt";
    trained.model.save(path);
    try {
        Predictor::load(path);
        FAIL() << "loaded a checkpoint with other features";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), path.string());
        EXPECT_NE(std::string(e.what()).find("a_is_transposed"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("retrain"), std::string::npos) << e.what();
    }
}

TEST_F(PredictorFiles, MissingOrForeignFilesAreClearErrors) {
    EXPECT_THROW(Predictor::load(dir / "absent.pt"), core::InputError);

    const auto text = dir / "text.pt";
    std::ofstream(text) << "not a model";
    try {
        Predictor::load(text);
        FAIL();
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("not a matmul_toolkit checkpoint"), std::string::npos) << e.what();
    }

    // A PyTorch archive that holds someone else's dict (e.g. a torch-diode checkpoint).
    auto foreign = PyValue::make_dict();
    foreign.set("model_state_dict", PyValue::make_dict());
    foreign.set("hidden_dim", PyValue::from_int(128));
    const auto other = dir / "diode.pt";
    core::write_file_atomically(other, write_torch_archive(foreign));
    try {
        Predictor::load(other);
        FAIL();
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("not a matmul_toolkit model checkpoint"), std::string::npos)
            << e.what();
    }

    // A truncated archive.
    const auto trained = train(ModelType::base);
    const auto good = dir / "good.pt";
    trained.model.save(good);
    const auto bytes = core::read_file(good);
    const auto cut = dir / "cut.pt";
    core::write_file_atomically(cut, bytes.substr(0, bytes.size() / 2));
    EXPECT_THROW(Predictor::load(cut), core::InputError);
}

TEST(Predictor, AnEmptyPredictorThrowsInsteadOfCrashing) {
    const Predictor empty;
    EXPECT_THROW(empty.info(), core::Error);
    EXPECT_THROW(empty.predict_log_ms("mm", core::make_shape(1, 8, 8, 8, "float32"), some_configs()), core::Error);
}

TEST_F(PredictorFiles, CudaOnAMachineWithoutItIsAClearError) {
    if (default_training_device() == "cuda") GTEST_SKIP() << "a CUDA device is present";
    const auto trained = train(ModelType::base);
    const auto path = dir / "m.pt";
    trained.model.save(path);
    EXPECT_THROW(Predictor::load(path, "cuda"), core::InputError);
}

}  // namespace
}  // namespace mmt::model
