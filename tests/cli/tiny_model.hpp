#pragma once
// A small model trained by the `train` subcommand on the shipped sample of real CPU
// timings (data/datasets/sample_cpu.json, hardware "AMD EPYC"), for the tests of the
// commands that apply a model: validate-max-autotune, recommend, export-lut.
//
// ctest runs every test case in its own process, so the model is trained once per build
// of the binary and shared through a cache directory guarded by a file lock.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"

namespace mmt::testing {

inline std::string sample_dataset() { return std::string(MMT_SOURCE_DIR) + "/data/datasets/sample_cpu.json"; }
inline std::string example_shapeset() { return std::string(MMT_SOURCE_DIR) + "/data/shapesets/example_shapes.json"; }
inline std::string default_solution() {
    return std::string(MMT_SOURCE_DIR) + "/data/solutions/default_max_autotune.json";
}

/// Trains a two-layer base model for a few epochs (or reuses the one trained by this
/// build of the binary) and copies it to `dir`/model.pt; fails the test when training fails.
inline std::filesystem::path train_tiny_model(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    const auto stamp = fs::last_write_time(MMT_CLI_PATH).time_since_epoch().count();
    const auto cache = fs::temp_directory_path() /
                       ("mmt_tiny_model_" + std::to_string(std::hash<std::string>{}(MMT_CLI_PATH)) + "_" +
                        std::to_string(stamp));
    fs::create_directories(cache);
    const int lock = ::open((cache / "lock").c_str(), O_CREAT | O_RDWR, 0644);
    EXPECT_GE(lock, 0);
    ::flock(lock, LOCK_EX);
    const auto cached = cache / "model.pt";
    if (!fs::exists(cached)) {
        const auto result = run_cli({"--device", "cpu", "train", "--recipe", "quick", "--dataset", sample_dataset(), "--output",
                                     cached.string(), "--model-type", "base", "--hidden-dims", "32,16",
                                     "--num-epochs", "3", "--log-dir", (cache / "logs").string()},
                                    cache / "train");
        EXPECT_EQ(result.exit_code, 0) << result.err;
    }
    ::flock(lock, LOCK_UN);
    ::close(lock);
    const auto model = dir / "model.pt";
    fs::copy_file(cached, model, fs::copy_options::overwrite_existing);
    return model;
}

}  // namespace mmt::testing
