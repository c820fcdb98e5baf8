// `convert`: JSON <-> msgpack round trips, refusing to overwrite, bad input.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

const fs::path kData = MMT_TEST_DATA_DIR;

class ConvertCommand : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_convert"); }
    void TearDown() override { fs::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir / "io"); }
    fs::path at(const std::string& name) const { return m_dir / name; }

private:
    fs::path m_dir;
};

TEST_F(ConvertCommand, JsonToMsgpackAndBackIsByteIdentical) {
    const auto there = run({"convert", "--input-files", (kData / "dataset_current.json").string(),
                            "--output-dir", at("mp").string()});
    ASSERT_EQ(there.exit_code, 0) << there.err;
    EXPECT_EQ(there.out, (kData / "dataset_current.json").string() + " -> " +
                             (at("mp") / "dataset_current.msgpack").string() + " (dataset)\n");

    const auto back = run({"convert", "--input-files", at("mp").string(), "--output-dir",
                           at("js").string()});
    ASSERT_EQ(back.exit_code, 0) << back.err;
    EXPECT_EQ(slurp(at("js") / "dataset_current.json"), slurp(kData / "dataset_current.json"));
}

TEST_F(ConvertCommand, GlobalFormatAndLayoutChooseTheOutput) {
    const auto result = run({"--format", "json", "convert", "--input-files",
                             (kData / "dataset_legacy.json").string(), "--output-dir",
                             at("out").string(), "--diode-layout", "current"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto text = slurp(at("out") / "dataset_legacy.json");
    EXPECT_EQ(text.find("\"name\": \"mm\",\n"), std::string::npos);  // no legacy "name" fields
    EXPECT_NE(text.find("\"config\": {\n"), std::string::npos);     // config objects, not strings
}

TEST_F(ConvertCommand, RefusesToOverwriteWithoutTheFlag) {
    const std::vector<std::string> args{"convert", "--input-files",
                                        (kData / "solution_flat.json").string(), "--output-dir",
                                        at("out").string()};
    ASSERT_EQ(run(args).exit_code, 0);
    const auto again = run(args);
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_EQ(again.err, "error: " + (at("out") / "solution_flat.msgpack").string() +
                             ": already exists (pass --overwrite to replace it)\n");
    auto with_flag = args;
    with_flag.push_back("--overwrite");
    EXPECT_EQ(run(with_flag).exit_code, 0);
}

TEST_F(ConvertCommand, NeverWritesOverAnotherInput) {
    // In place, a.json -> a.msgpack would replace the input a.msgpack before it is read.
    fs::create_directories(at("both"));
    fs::copy_file(kData / "dataset_current.json", at("both") / "a.json");
    fs::copy_file(kData / "dataset_legacy.json", at("both") / "a_legacy.json");
    ASSERT_EQ(run({"convert", "--input-files", (at("both") / "a_legacy.json").string(),
                   "--output-dir", at("both").string()})
                  .exit_code,
              0);
    fs::rename(at("both") / "a_legacy.msgpack", at("both") / "a.msgpack");
    const auto result = run({"convert", "--input-files", at("both").string(), "--output-dir",
                             at("both").string(), "--overwrite"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err, "error: " + (at("both") / "a.msgpack").string() +
                              ": the output would replace an input file\n");
    EXPECT_EQ(slurp(at("both") / "a.json"), slurp(kData / "dataset_current.json"));
}

TEST_F(ConvertCommand, BadInputWritesNothing) {
    const auto file = (kData / "bad" / "unknown_dtype.json").string();
    const auto result = run({"convert", "--input-files", file, "--output-dir", at("out").string()});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: " + file + ": ", 0), 0u) << result.err;
    EXPECT_FALSE(fs::exists(at("out") / "unknown_dtype.msgpack"));
}

TEST_F(ConvertCommand, MissingRequiredOptionIsAnError) {
    const auto result = run({"convert", "--input-files", (kData / "dataset_current.json").string()});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("--output-dir"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace mmt::testing
