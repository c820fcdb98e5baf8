// `collect --devices`: worker processes on the CPU backend measure one problem list into
// the usual output; a worker killed mid-run is reported and its problem retried elsewhere.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

std::set<std::string> problems_in(const core::Dataset& dataset) {
    std::set<std::string> keys;
    for (const auto& hw : dataset.hardware())
        for (const auto& op : hw.operations)
            for (const auto& p : op.problems) keys.insert(op.name + core::shape_key(p.shape));
    return keys;
}

std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> children;
    for (const auto& entry : fs::directory_iterator("/proc")) {
        const auto name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string text;
        std::getline(stat, text);
        const auto close = text.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(text.substr(close + 2));
        char state = 0;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == parent) children.push_back(static_cast<pid_t>(std::stoi(name)));
    }
    return children;
}

// The value of a worker's --device-index, read from its command line.
std::string device_index_of(pid_t pid) {
    std::ifstream file("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> argv;
    for (std::string arg; std::getline(file, arg, '\0');) argv.push_back(arg);
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "--device-index") return argv[i + 1];
    return {};
}

class CollectWorkers : public ::testing::Test {
protected:
    void SetUp() override { dir = fresh_temp_dir("mmt_cli_workers"); }
    void TearDown() override {
        if (!HasFailure()) fs::remove_all(dir);
    }

    std::vector<std::string> args(const std::string& output, int num_shapes, int max_size, int min_size = 16) const {
        return {"--device", "cpu", "--seed", "11", "collect", "--num-shapes", std::to_string(num_shapes),
                "--min-size", std::to_string(min_size), "--max-size", std::to_string(max_size), "--ops", "mm", "--warmup", "0",
                "--repeat", "1", "--no-reference", "--output", (dir / output).string()};
    }

    fs::path dir;
};

TEST_F(CollectWorkers, TwoWorkersCollectWhatOneProcessCollects) {
    ASSERT_EQ(run_cli(args("one.json", 6, 48), dir / "logs").exit_code, 0);
    auto two = args("two.json", 6, 48);
    two.insert(two.end(), {"--devices", "0,1", "--chunk-size", "4"});
    const auto r = run_cli(two, dir / "logs");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("6 collected"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir / "two_1.json"));
    EXPECT_TRUE(fs::exists(dir / "two_2.json"));
    core::Dataset chunks = core::load_dataset(dir / "two_1.json");
    chunks.merge(core::load_dataset(dir / "two_2.json"));
    EXPECT_EQ(problems_in(chunks), problems_in(core::load_dataset(dir / "one.json")));
    EXPECT_EQ(chunks.num_timings(), core::load_dataset(dir / "one.json").num_timings());

    // The same command again resumes: nothing is left to measure.
    const auto again = run_cli(two, dir / "logs");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.out.find("0 collected, 6 already in the output"), std::string::npos) << again.out;
}

TEST_F(CollectWorkers, AKilledWorkerIsReportedAndItsProblemRetriedElsewhere) {
    // Problems a worker takes about a second for, four each.
    const auto full = args("data.json", 8, 1024, 768);
    const pid_t parent = ::fork();
    if (parent == 0) {
        const int out = ::open((dir / "stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = ::open((dir / "stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(out, 1);
        ::dup2(err, 2);
        std::vector<std::string> copy = full;
        copy.insert(copy.end(), {"--devices", "0,1"});
        std::string binary = MMT_CLI_PATH;
        std::vector<char*> argv{binary.data()};
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execv(binary.c_str(), argv.data());
        ::_exit(127);
    }
    std::vector<pid_t> workers;
    // Generous: starting the binary is slow on a loaded machine.
    for (int i = 0; i < 6000 && workers.size() < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        workers = children_of(parent);
    }
    ASSERT_EQ(workers.size(), 2u);
    // Killing at a fixed moment raced the workers: one could be just done with a problem, not
    // yet handed the next. The worker that just finished the first problem is handed its next
    // one at once and takes about a second for it, so 50 ms later it surely has one in hand.
    std::string first;
    for (int i = 0; i < 12000 && first.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        const auto err = slurp(dir / "stderr.txt");
        const auto at = err.find("[1/8]");
        if (at != std::string::npos && err.find('\n', at) != std::string::npos)
            first = err.substr(at, err.find('\n', at) - at);
    }
    const auto on = first.find(" on device ");
    ASSERT_NE(on, std::string::npos) << first;
    const std::string device = first.substr(on + 11, first.find(' ', on + 11) - on - 11);
    pid_t victim = 0;
    for (const pid_t pid : workers)
        if (device_index_of(pid) == device) victim = pid;
    ASSERT_NE(victim, 0) << "no worker runs on device " << device;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(victim, SIGKILL);
    int status = 0;
    ::waitpid(parent, &status, 0);
    const auto err = slurp(dir / "stderr.txt");
    const auto out = slurp(dir / "stdout.txt");
    ASSERT_TRUE(WIFEXITED(status)) << err;
    ASSERT_EQ(WEXITSTATUS(status), 0) << err;
    EXPECT_NE(err.find("was killed by signal 9"), std::string::npos) << err;
    EXPECT_NE(err.find("retrying it on another worker"), std::string::npos) << err;
    EXPECT_NE(out.find("worker failure: "), std::string::npos) << out;
    EXPECT_NE(out.find("8 collected"), std::string::npos) << out;
    EXPECT_EQ(core::load_dataset(dir / "data.json").num_problems(), 8u);
}

TEST_F(CollectWorkers, BadDevicesAreOneErrorLine) {
    for (const auto& [devices, expected] : std::vector<std::pair<std::string, std::string>>{
             {"0,0", "error: --devices: device 0 is listed twice\n"},
             {"x", "error: --devices: 'x' is not a device index (expected 0,1,... or all)\n"},
             {"100000", "error: --devices: device 100000 is not available"}}) {
        auto a = args("data.json", 2, 48);
        a.insert(a.end(), {"--devices", devices});
        const auto r = run_cli(a, dir / "logs");
        EXPECT_EQ(r.exit_code, 2) << devices;
        EXPECT_EQ(r.err.rfind(expected, 0), 0u) << r.err;
        EXPECT_FALSE(fs::exists(dir / "data.json"));
    }
}

}  // namespace
}  // namespace mmt::testing
