// `collect` end to end through the binary: a tiny CPU collection, reproducibility, bad
// input, resume after SIGKILL, Ctrl-C.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

std::set<std::string> problems_in(const std::vector<fs::path>& files) {
    std::set<std::string> keys;
    for (const auto& file : files) {
        const auto dataset = core::load_dataset(file);
        for (const auto& hw : dataset.hardware())
            for (const auto& op : hw.operations)
                for (const auto& p : op.problems) keys.insert(op.name + core::shape_key(p.shape));
    }
    return keys;
}

std::vector<fs::path> chunk_files(const fs::path& dir, const std::string& stem) {
    std::vector<fs::path> files;
    for (int i = 1; fs::exists(dir / (stem + "_" + std::to_string(i) + ".json")); ++i) {
        files.push_back(dir / (stem + "_" + std::to_string(i) + ".json"));
    }
    return files;
}

// A child running the binary, its output in files, so the test can signal it mid-run.
class Child {
public:
    Child(const std::vector<std::string>& args, const fs::path& log_dir) {
        m_pid = ::fork();
        if (m_pid == 0) {
            const int out = ::open((log_dir / "child_stdout.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int err = ::open((log_dir / "child_stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            ::dup2(out, 1);
            ::dup2(err, 2);
            std::vector<char*> argv;
            std::string binary = MMT_CLI_PATH;
            argv.push_back(binary.data());
            std::vector<std::string> copy = args;
            for (auto& a : copy) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(binary.c_str(), argv.data());
            ::_exit(127);
        }
    }
    void signal(int sig) const { ::kill(m_pid, sig); }
    // The exit code, or 128 + the signal that ended it.
    int wait() const {
        int status = 0;
        ::waitpid(m_pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

private:
    pid_t m_pid = -1;
};

bool wait_for_file(const fs::path& path, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!fs::exists(path)) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

class CollectCommand : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_temp_dir("mmt_cli_collect"); }
    void TearDown() override { fs::remove_all(m_dir); }
    CliResult run(const std::vector<std::string>& args) { return run_cli(args, m_dir / "io"); }
    fs::path path(const std::string& name) const { return m_dir / name; }

    // Tiny problems, one timed run per config: a collection of a few problems takes well
    // under a second.
    std::vector<std::string> tiny(const std::string& output, int num_shapes) const {
        return {"--device", "cpu", "collect", "--num-shapes", std::to_string(num_shapes),
                "--min-size", "16", "--max-size", "48", "--warmup", "0", "--repeat", "1",
                "--output", path(output).string(), "--quiet"};
    }
    // Problems big enough that a run lasts a few seconds, chunked by 2.
    std::vector<std::string> slow(const std::string& output, int repeat) const {
        return {"--device", "cpu", "collect", "--num-shapes", "12", "--min-size", "160",
                "--max-size", "256", "--ops", "mm", "--warmup", "1", "--repeat",
                std::to_string(repeat), "--chunk-size", "2", "--output", path(output).string()};
    }

    fs::path m_dir;
};

TEST_F(CollectCommand, CollectsATinyDatasetAndPrintsItsStatisticsAndTheSummary) {
    const auto result = run(tiny("data.json", 3));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto dataset = core::load_dataset(path("data.json"));
    EXPECT_EQ(dataset.num_problems(), 3u);
    EXPECT_TRUE(fs::exists(path("data.json.meta.json")));
    EXPECT_NE(result.out.find("dataset: " + path("data.json").string()), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("problems: 3"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("Collection summary (cpu: "), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("pruned 12: duplicate on cpu"), std::string::npos) << result.out;
    EXPECT_EQ(result.err.find("configs/s, ETA"), std::string::npos) << "--quiet still drew progress";
}

TEST_F(CollectCommand, WithoutQuietAndWithoutATerminalLogsOneLinePerProblem) {
    auto args = tiny("data.json", 2);
    args.pop_back();  // --quiet
    const auto result = run(args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NE(result.err.find("[1/2] "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("[2/2] "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("configs/s, ETA"), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find('\r'), std::string::npos) << "a bar was drawn into a file";
}

TEST_F(CollectCommand, TheSameSeedGivesTheSameProblemsAndAnotherSeedOthers) {
    ASSERT_EQ(run(tiny("a.json", 4)).exit_code, 0);
    ASSERT_EQ(run(tiny("b.json", 4)).exit_code, 0);
    auto other = tiny("c.json", 4);
    other.insert(other.begin(), {"--seed", "7"});
    ASSERT_EQ(run(other).exit_code, 0);
    EXPECT_EQ(problems_in({path("a.json")}), problems_in({path("b.json")}));
    EXPECT_NE(problems_in({path("a.json")}), problems_in({path("c.json")}));
}

TEST_F(CollectCommand, FormatDecidesTheExtensionAndTracesArePerProblem) {
    auto args = tiny("data", 2);
    args.insert(args.begin(), {"--format", "msgpack"});
    args.insert(args.end(), {"--trace-dir", path("traces").string()});
    const auto result = run(args);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(core::load_dataset(path("data.msgpack")).num_problems(), 2u);
    std::size_t traces = 0;
    for (const auto& entry : fs::directory_iterator(path("traces"))) traces += entry.path().extension() == ".json";
    EXPECT_EQ(traces, 2u);
}

TEST_F(CollectCommand, StopAfterStartsNoProblemPastItsTimeAndTheRerunCollectsTheRest) {
    auto args = slow("data.json", 3);
    args.insert(args.end(), {"--stop-after", "0.3"});
    const auto first = run(args);
    ASSERT_EQ(first.exit_code, 0) << first.err;
    // The first problem starts at once; how many follow within 0.3 s depends on the machine.
    const std::size_t collected = problems_in(chunk_files(m_dir, "data")).size();
    EXPECT_GE(collected, 1u);
    const std::size_t not_started = 12 - collected;
    if (not_started > 0) {
        EXPECT_NE(first.out.find(std::to_string(not_started) + " not started (--stop-after"), std::string::npos)
            << first.out;
    }
    args.resize(args.size() - 2);
    const auto second = run(args);
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.out.find(std::to_string(not_started) + " collected, " + std::to_string(collected) +
                              " already in the output"),
              std::string::npos)
        << second.out;
    EXPECT_EQ(problems_in(chunk_files(m_dir, "data")).size(), 12u);
}

TEST_F(CollectCommand, BadInputIsOneErrorLineAndExitCode2BeforeAnyWork) {
    // One case per kind; engine_test checks every option at the library level.
    {
        std::ofstream(path("a_file")) << "x";
    }
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--max-size", "8"}, "error: --max-size: "},  // below --min-size 16
        {{"--ops", "conv"}, "error: --ops: "},
        {{"--dtypes", "float16"}, "error: --dtypes: float16 is not supported by the cpu backend"},
        {{"--search-space", "FAST"}, "error: --search-space: "},
        {{"--output", path("a_file/data.json").string()}, "error: --output: "},
        {{"--shard-index", "3", "--num-shards", "3"}, "error: --shard-index: 3 is outside 0..2"},
        {{"--num-shards", "0"}, "error: --num-shards: must be at least 1"},
        {{"--stop-after", "0"}, "error: --stop-after: must be positive seconds"},
    };
    for (const auto& [extra, expected] : cases) {
        auto args = tiny("data.json", 2);
        args.insert(args.end(), extra.begin(), extra.end());
        const auto result = run(args);
        EXPECT_EQ(result.exit_code, 2) << expected;
        EXPECT_EQ(result.err.rfind(expected, 0), 0u) << result.err;
        EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
        EXPECT_FALSE(fs::exists(path("data.json"))) << expected;
    }
}

TEST_F(CollectCommand, ResumesAfterSigkillWithoutLosingFinishedChunks) {
    // The problem set an uninterrupted run collects (timing options don't change it).
    ASSERT_EQ(run(slow("full.json", 1)).exit_code, 0);
    const auto full = problems_in(chunk_files(m_dir, "full"));
    ASSERT_EQ(full.size(), 12u);

    {
        // data_2.json appears once the first chunk is complete and saved.
        Child child(slow("data.json", 20), m_dir);
        ASSERT_TRUE(wait_for_file(path("data_2.json"), std::chrono::seconds(120)));
        child.signal(SIGKILL);
        EXPECT_EQ(child.wait(), 128 + SIGKILL);
    }
    // Every file left behind loads; the first chunk is complete.
    const auto left = chunk_files(m_dir, "data");
    ASSERT_FALSE(left.empty());
    EXPECT_EQ(core::load_dataset(left.front()).num_problems(), 2u);
    const auto saved = problems_in(left);
    EXPECT_LT(saved.size(), 12u) << "the run finished before it was killed";

    // With other timing settings the file is refused (its times would not compare);
    // with the same ones the run resumes.
    const auto other = run(slow("data.json", 1));
    EXPECT_EQ(other.exit_code, 2);
    EXPECT_NE(other.err.find("was collected with repeat 20, this run has 1"), std::string::npos) << other.err;
    const auto resumed = run(slow("data.json", 20));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.err.find("resuming: " + std::to_string(saved.size()) + " of 12"), std::string::npos)
        << resumed.err;
    EXPECT_EQ(problems_in(chunk_files(m_dir, "data")), full);
}

TEST_F(CollectCommand, CtrlCSavesFinishedWorkAndExits130) {
    Child child(slow("data.json", 20), m_dir);
    ASSERT_TRUE(wait_for_file(path("data_2.json"), std::chrono::seconds(120)));
    child.signal(SIGINT);
    EXPECT_EQ(child.wait(), 130);
    const std::string err = slurp(m_dir / "child_stderr.txt");
    EXPECT_NE(err.find("error: interrupted: "), std::string::npos) << err;
    EXPECT_NE(slurp(m_dir / "child_stdout.txt").find("Collection summary"), std::string::npos);

    const auto saved = problems_in(chunk_files(m_dir, "data"));
    EXPECT_GE(saved.size(), 3u);
    EXPECT_LT(saved.size(), 12u);
    const auto resumed = run(slow("data.json", 20));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(problems_in(chunk_files(m_dir, "data")).size(), 12u);
}

}  // namespace
}  // namespace mmt::testing
