#include "matmul_toolkit/collect/script_collection.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/core/error.hpp"

extern char** environ;

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

/// The collector's command line: the script and its arguments go after "--".
std::vector<std::string> collector_command(const ScriptCollection& request) {
    std::vector<std::string> argv{request.python, "-m", "matmul_toolkit_inductor.collect_script",
                                  "--output", request.output.string()};
    if (!request.hardware_name.empty()) {
        argv.push_back("--hardware-name");
        argv.push_back(request.hardware_name);
    }
    argv.push_back("--");
    argv.insert(argv.end(), request.script_and_args.begin(), request.script_and_args.end());
    return argv;
}

/// This process's environment with `dir` put first on PYTHONPATH.
std::vector<std::string> environment_with_pythonpath(const fs::path& dir) {
    std::vector<std::string> env;
    std::string pythonpath = "PYTHONPATH=" + dir.string();
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        if (entry.rfind("PYTHONPATH=", 0) == 0) {
            if (entry.size() > 11) pythonpath += ":" + entry.substr(11);
        } else {
            env.push_back(entry);
        }
    }
    env.push_back(pythonpath);
    return env;
}

/// Runs `argv` with its output on ours and returns its wait status. Ctrl-C reaches the
/// child (same process group), which saves what it collected; this process waits for it.
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    std::vector<char*> c_argv;
    for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
    c_argv.push_back(nullptr);
    std::vector<char*> c_env;
    for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
    c_env.push_back(nullptr);

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGQUIT);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

    struct sigaction ignore {}, old_int {}, old_quit {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGINT, &ignore, &old_int);
    ::sigaction(SIGQUIT, &ignore, &old_quit);

    pid_t pid = -1;
    const int spawn_error = ::posix_spawnp(&pid, c_argv[0], nullptr, &attr, c_argv.data(), c_env.data());
    posix_spawnattr_destroy(&attr);
    int status = 0;
    if (spawn_error == 0) {
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    if (spawn_error != 0) {
        throw core::InputError("--python", "cannot run '" + argv[0] + "': " + std::strerror(spawn_error));
    }
    return status;
}

}  // namespace

int run_script_collection(const ScriptCollection& request) {
    if (request.script_and_args.empty()) {
        throw core::InputError("collect-script", "missing SCRIPT (the Python script to run)");
    }
    const std::string& script = request.script_and_args.front();
    if (script.size() > 1 && script[0] == '-') {
        throw core::InputError("collect-script", "unknown option '" + script +
                                                     "' (global options go before the subcommand name)");
    }
    std::error_code ec;
    if (!fs::is_regular_file(script, ec)) {
        throw core::InputError(script, fs::exists(script, ec) ? "not a regular file" : "no such file");
    }
    if (request.output.extension() != ".json") {
        throw core::InputError("--output", "'" + request.output.string() +
                                               "': the dataset is written as JSON (.json); `convert` makes msgpack from it");
    }
    const fs::path package_dir = find_inductor_package();
    if (package_dir.empty()) {
        throw core::InputError("collect-script", "the matmul_toolkit_inductor package was not found "
                                                 "(set MMT_INDUCTOR_PYTHONPATH to the folder holding it)");
    }
    const int status = run_child(collector_command(request), environment_with_pythonpath(package_dir));
    if (WIFSIGNALED(status)) {
        if (WTERMSIG(status) == SIGINT) return core::kExitInterrupted;
        throw core::Error(request.python, "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                                              strsignal(WTERMSIG(status)) + ")");
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace mmt::collect
