#pragma once
// Runs a bash script of the repository the way a user does (environment variables before
// it, stdout and stderr captured), in a fresh directory per test: what the workflow and
// SLURM script tests share.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace mmt::testing {

struct ScriptResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

inline std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

/// A test with its own directory (`dir`), kept when the test fails for a look afterwards.
class ScriptTest : public ::testing::Test {
protected:
    explicit ScriptTest(std::string prefix) : m_prefix(std::move(prefix)) {}

    void SetUp() override {
        dir = std::filesystem::temp_directory_path() /
              (m_prefix + "_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    void TearDown() override {
        if (!HasFailure()) std::filesystem::remove_all(dir);
    }

    /// Runs `env` (NAME=value ...) bash MMT_SOURCE_DIR/`script` `args` with MMT set to the
    /// built binary; its output goes to files in `dir`.
    ScriptResult run_script(const std::string& script, const std::string& env, const std::string& args = "") const {
        const std::string command = "MMT='" MMT_CLI_PATH "' " + env + " bash '" MMT_SOURCE_DIR "/" + script + "' " +
                                    args + " >'" + (dir / "out.txt").string() + "' 2>'" +
                                    (dir / "err.txt").string() + "'";
        const int status = std::system(command.c_str());
        ScriptResult r;
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = slurp(dir / "out.txt");
        r.err = slurp(dir / "err.txt");
        return r;
    }

    std::filesystem::path dir;

private:
    std::string m_prefix;
};

}  // namespace mmt::testing
