// scripts/datasets.sh: packs a dataset and its sidecar into data/archive and unpacks them
// unchanged; the shipped archives unpack into datasets the toolkit reads, with the problem
// counts data/README.md gives.

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "script_runner.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;

class DatasetsScript : public testing::ScriptTest {
protected:
    DatasetsScript() : ScriptTest("mmt_datasets_script") {}

    void SetUp() override {
        ScriptTest::SetUp();
        fs::create_directories(dir / "data" / "archive");
        fs::create_directories(dir / "data" / "datasets");
    }

    testing::ScriptResult run(const std::string& args) const {
        return run_script("scripts/datasets.sh", "DATA_DIR='" + (dir / "data").string() + "'", args);
    }

    void write(const fs::path& path, const std::string& text) const { std::ofstream(path) << text; }
};

TEST_F(DatasetsScript, PackThenUnpackGivesBackTheSameFilesAndKeepsThoseAlreadyThere) {
    const fs::path datasets = dir / "data" / "datasets";
    write(datasets / "set_a.msgpack", "timings of a");
    write(datasets / "set_a.msgpack.meta.json", "{\"run\": \"a\"}\n");

    auto r = run("pack set_a");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir / "data" / "archive" / "set_a.tar.xz"));
    EXPECT_FALSE(fs::exists(dir / "data" / "archive" / "set_a.tar.xz.tmp"));

    fs::remove(datasets / "set_a.msgpack");
    write(datasets / "set_a.msgpack.meta.json", "edited\n");
    r = run("unpack");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(testing::slurp(datasets / "set_a.msgpack"), "timings of a");
    EXPECT_EQ(testing::slurp(datasets / "set_a.msgpack.meta.json"), "edited\n");  // kept
}

TEST_F(DatasetsScript, MissingFilesAndArchivesAreOneErrorLineAndExitTwo) {
    auto r = run("pack absent");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("error: " + (dir / "data" / "datasets" / "absent.msgpack").string() + ": no such file"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir / "data" / "archive" / "absent.tar.xz"));

    r = run("unpack absent");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("absent.tar.xz: no such archive"), std::string::npos) << r.err;

    r = run("shuffle");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("datasets.sh unpack"), std::string::npos) << r.err;
}

TEST_F(DatasetsScript, ShippedArchivesUnpackIntoTheDatasetsTheReadmeCounts) {
    fs::remove(dir / "data" / "archive");
    fs::create_directory_symlink(fs::path(MMT_SOURCE_DIR) / "data" / "archive", dir / "data" / "archive");
    const auto r = run("unpack");
    ASSERT_EQ(r.exit_code, 0) << r.err;

    const fs::path datasets = dir / "data" / "datasets";
    const std::pair<const char*, std::size_t> expected[] = {
        {"h200_inductor_default_lognormal_unpadded", 800},  {"h200_inductor_default_lognormal_s49_unpadded", 800},
        {"h200_inductor_default_bmm_half_s50_unpadded", 600}, {"h200_inductor_default_half_s51_unpadded", 800},
        {"h200_inductor_default_small_m_unpadded", 119},
    };
    for (const auto& [name, problems] : expected) {
        SCOPED_TRACE(name);
        ASSERT_TRUE(fs::exists(datasets / (std::string(name) + ".msgpack.meta.json")));
        EXPECT_EQ(core::load_dataset(datasets / (std::string(name) + ".msgpack")).num_problems(), problems);
    }
}

}  // namespace
}  // namespace mmt
