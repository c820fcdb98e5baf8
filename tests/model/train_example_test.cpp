// The example program (examples/train_example.cpp) is part of the build; this runs it.

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/model/predictor.hpp"

namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command, int& exit_code) {
    std::string output;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) return output;
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    const int status = ::pclose(pipe);
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return output;
}

TEST(TrainExample, TrainsSavesLoadsAndRanksOnTheShippedSample) {
    const auto model = fs::temp_directory_path() / ("train_example_test_" + std::to_string(::getpid()) + ".pt");
    int code = -1;
    const auto out = run(std::string(MMT_EXAMPLE_PATH) + " " + MMT_SOURCE_DIR + "/data/datasets/sample_cpu.json " +
                             model.string(),
                         code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find("configs ranked by predicted time"), std::string::npos) << out;
    EXPECT_NE(out.find("  1. "), std::string::npos) << out;
    const auto loaded = mmt::model::Predictor::load(model);
    EXPECT_EQ(loaded.info().hardware_name, "AMD EPYC");
    fs::remove(model);
}

TEST(TrainExample, RunsOnItsSyntheticDataset) {
    int code = -1;
    const auto out = run(MMT_EXAMPLE_PATH, code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find("test R2"), std::string::npos) << out;
}

}  // namespace
