#pragma once
// A test suite of one subcommand that applies a model: a fresh directory and the tiny model
// (tiny_model.hpp) for the whole suite, and run() for `--device cpu COMMAND --model M ...`.
//
//   class RecommendCli : public TinyModelCli<RecommendCli> {
//   public:
//       static constexpr const char* kCommand = "recommend";
//   };

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "tiny_model.hpp"

namespace mmt::testing {

template <typename Suite>
class TinyModelCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir = new std::filesystem::path(fresh_temp_dir(std::string("mmt_") + Suite::kCommand));
        model = new std::filesystem::path(train_tiny_model(*dir));
    }
    static void TearDownTestSuite() {
        std::filesystem::remove_all(*dir);
        delete dir;
        delete model;
        dir = model = nullptr;
    }

    /// Runs `--device cpu COMMAND --model MODEL extra...` in the suite's directory.
    CliResult run(const std::vector<std::string>& extra) {
        std::vector<std::string> args{"--device", "cpu", Suite::kCommand, "--model", model->string()};
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args, *dir / "run");
    }

    static inline std::filesystem::path* dir = nullptr;
    static inline std::filesystem::path* model = nullptr;
};

}  // namespace mmt::testing
