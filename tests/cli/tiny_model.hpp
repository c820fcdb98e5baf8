#pragma once
// A small model trained by the `train` subcommand on the shipped sample of real CPU
// timings (data/datasets/sample_cpu.json, hardware "AMD EPYC"), for the tests of the
// commands that apply a model: validate-max-autotune, recommend, export-lut.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"

namespace mmt::testing {

inline std::string sample_dataset() { return std::string(MMT_SOURCE_DIR) + "/data/datasets/sample_cpu.json"; }
inline std::string example_shapeset() { return std::string(MMT_SOURCE_DIR) + "/data/shapesets/example_shapes.json"; }
inline std::string default_solution() {
    return std::string(MMT_SOURCE_DIR) + "/data/solutions/default_max_autotune.json";
}

/// Trains a two-layer base model for a few epochs into `dir`/model.pt; fails the test
/// when training fails.
inline std::filesystem::path train_tiny_model(const std::filesystem::path& dir) {
    const auto model = dir / "model.pt";
    const auto result = run_cli({"--device", "cpu", "train", "--dataset", sample_dataset(), "--model",
                                 model.string(), "--model-type", "base", "--hidden-dims", "32,16",
                                 "--num-epochs", "3", "--log-dir", (dir / "logs").string()},
                                dir / "train");
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return model;
}

}  // namespace mmt::testing
