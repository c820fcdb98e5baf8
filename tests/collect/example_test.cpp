// The example program built with the project runs and leaves a dataset and a table.

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace {
namespace fs = std::filesystem;

TEST(DatasetCollectorExample, CollectsSavesAndReloadsFourProblems) {
    const fs::path dir = fs::temp_directory_path() / ("mmt_example_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const std::string command = std::string("'") + MMT_EXAMPLE_PATH + "' '" + dir.string() + "' cpu >'" +
                                (fs::temp_directory_path() / "mmt_example_test.log").string() + "' 2>&1";
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);

    const auto dataset = mmt::core::load_dataset(dir / "collector_dataset.json");
    EXPECT_EQ(dataset.num_problems(), 4u);
    const auto table = mmt::core::load_document(dir / "collector_table.json");
    EXPECT_TRUE(table.contains("hardware"));
    fs::remove_all(dir);
}

}  // namespace
