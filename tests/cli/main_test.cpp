// The executable's contract: --help and --version exit 0, bad usage exits 2 with one
// `error:` line on stderr.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/build_config.hpp"

namespace mmt::testing {
namespace {

class Cli : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_main"); }
    void TearDown() override { std::filesystem::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir); }

private:
    std::filesystem::path m_dir;
};

TEST_F(Cli, HelpExitsZeroAndListsTheSubcommands) {
    const auto result = run({"--help"});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_NE(result.out.find("stats"), std::string::npos);
    EXPECT_NE(result.out.find("convert"), std::string::npos);
    EXPECT_NE(result.out.find("--seed"), std::string::npos);
}

TEST_F(Cli, EverySubcommandHasHelp) {
    for (const char* name : {"stats", "convert"}) {
        const auto result = run({name, "--help"});
        EXPECT_EQ(result.exit_code, 0) << name;
        EXPECT_NE(result.out.find("Usage"), std::string::npos) << name;
    }
}

TEST_F(Cli, VersionPrintsTheProjectVersion) {
    const auto result = run({"--version"});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_EQ(result.out, std::string(MMT_VERSION_STRING) + "\n");
}

TEST_F(Cli, UnknownOptionIsOneErrorLineAndExit2) {
    const auto result = run({"stats", "--no-such-option", "x.json"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
    EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << result.err;
    EXPECT_EQ(result.out, "");
}

TEST_F(Cli, MissingSubcommandIsAnError) {
    const auto result = run({});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
}

TEST_F(Cli, BadGlobalOptionValueIsAnError) {
    const auto result = run({"--format", "xml", "stats", "x.json"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.err.find("--format"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace mmt::testing
