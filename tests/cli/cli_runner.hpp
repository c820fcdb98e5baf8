#pragma once
// Runs the built matmul_toolkit binary and captures its exit code, stdout and stderr.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace mmt::testing {

struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

inline std::string shell_quote(const std::string& arg) {
    std::string quoted = "'";
    for (char c : arg) {
        if (c == '\'') {
            quoted += "'\\''";
        } else {
            quoted += c;
        }
    }
    return quoted + "'";
}

inline std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

/// Runs MMT_CLI_PATH with `args`; `scratch` holds the captured streams.
inline CliResult run_cli(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    std::filesystem::create_directories(scratch);
    const auto out_path = scratch / "stdout.txt";
    const auto err_path = scratch / "stderr.txt";
    std::string command = shell_quote(MMT_CLI_PATH);
    for (const auto& arg : args) command += " " + shell_quote(arg);
    command += " >" + shell_quote(out_path.string()) + " 2>" + shell_quote(err_path.string());
    const int status = std::system(command.c_str());
    CliResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(out_path);
    result.err = slurp(err_path);
    return result;
}

/// A fresh directory per test, removed afterwards.
inline std::filesystem::path fresh_temp_dir(const std::string& prefix) {
    const auto dir = std::filesystem::temp_directory_path() /
                     (prefix + "_" + std::to_string(::getpid()) + "_" +
                      std::to_string(std::rand()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

}  // namespace mmt::testing
