// Kill-safety: `collect` (CPU backend) and `train` are killed with SIGKILL at seeded random
// moments, then run again. Every file left behind is whole, no problem is lost or
// duplicated, and the final result equals an uninterrupted run's.

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"
#include "matmul_toolkit/model/predictor.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr unsigned kSeed = 20261122;

// How many kills land (the child is still running when SIGKILL arrives) is printed, so
// the log shows what a run proved.
int env_int(const char* name, int fallback) {
    const char* value = std::getenv(name);
    return value ? std::atoi(value) : fallback;
}

bool is_temp_file(const fs::path& p) { return p.filename().string().find(".tmp") != std::string::npos; }

// Problem key -> how many times it occurs over every dataset file in `dir` (sidecars and
// temporary files aside). Throws when a file does not load, i.e. is corrupt or truncated.
std::map<std::string, int> problem_counts(const fs::path& dir, const std::string& stem) {
    std::map<std::string, int> counts;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (name.rfind(stem, 0) != 0 || entry.path().extension() != ".json" || is_temp_file(entry.path())) continue;
        if (name.size() > 10 && name.substr(name.size() - 10) == ".meta.json") {
            const auto meta = nlohmann::json::parse(Child::slurp_file(entry.path()));  // throws when cut short
            (void)meta;
            continue;
        }
        const auto dataset = core::load_dataset(entry.path());
        for (const auto& hw : dataset.hardware())
            for (const auto& op : hw.operations)
                for (const auto& p : op.problems) ++counts[op.name + core::shape_key(p.shape)];
    }
    return counts;
}

// Problems of the dataset files in `dir` whose file's sidecar has no record of them, as
// "file: key" lines ("" when every one is recorded).
std::string problems_without_meta(const fs::path& dir, const std::string& stem) {
    std::string missing;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const auto name = entry.path().filename().string();
        if (name.rfind(stem, 0) != 0 || entry.path().extension() != ".json" || is_temp_file(entry.path()) ||
            name.find(".meta.json") != std::string::npos)
            continue;
        const auto meta = core::load_meta_sidecar(entry.path());
        const auto& recorded = meta.contains("problems") ? meta["problems"] : core::OrderedJson::object();
        const auto dataset = core::load_dataset(entry.path());
        for (const auto& hw : dataset.hardware())
            for (const auto& op : hw.operations)
                for (const auto& p : op.problems) {
                    const auto key = core::meta_problem_key(hw.name, op.name, p.shape);
                    if (!recorded.contains(key)) missing += name + ": " + key + "\n";
                }
    }
    return missing;
}

// The temporary files in `dir`, by name ("" when none), for the failure message.
std::string temp_files(const fs::path& dir) {
    std::string names;
    for (const auto& entry : fs::directory_iterator(dir))
        if (is_temp_file(entry.path())) names += (names.empty() ? "" : " ") + entry.path().filename().string();
    return names;
}

class KillSafety : public ::testing::Test {
protected:
    void SetUp() override { m_dir = fresh_dir("mmt_kill_safety"); }
    void TearDown() override { fs::remove_all(m_dir); }

    // Kills a fresh child after a random share of `reference` (the uninterrupted run's
    // duration); returns true when the kill landed before the child finished.
    bool kill_at_random(const std::vector<std::string>& args, Clock::duration reference,
                        std::mt19937& rng, double low, double high, const std::string& log) {
        std::uniform_real_distribution<double> share(low, high);
        const auto delay = std::chrono::duration_cast<Clock::duration>(reference * share(rng));
        Child child(args, m_dir / log);
        const auto deadline = Clock::now() + delay;
        while (Clock::now() < deadline && !child.finished()) std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (child.finished()) {
            EXPECT_EQ(child.wait(), 0) << child.err();
            return false;
        }
        child.kill(SIGKILL);
        const int code = child.wait();
        EXPECT_TRUE(code == 128 + SIGKILL || code == 0) << code << child.err();
        return code == 128 + SIGKILL;
    }

    fs::path m_dir;
};

TEST_F(KillSafety, CollectKilledAtRandomMomentsResumesToTheUninterruptedProblemSet) {
    // One problem per chunk, so kills often land while a chunk file is being written.
    const auto args = [&](const std::string& output) {
        return std::vector<std::string>{"--device", "cpu", "collect", "--num-shapes", "24", "--min-size", "96",
                                        "--max-size", "192", "--ops", "mm", "addmm", "--warmup", "0", "--repeat",
                                        "1", "--chunk-size", "1", "--quiet",
                                        "--output", (m_dir / output).string()};
    };
    // The shorter of two uninterrupted runs: a run of a few hundred ms that a busy machine
    // slowed would set kill times past the end of the next runs.
    auto reference = Clock::duration::max();
    for (const char* output : {"full.json", "again.json"}) {
        const auto start = Clock::now();
        ASSERT_EQ(run_child(args(output), m_dir / "log_full"), 0) << Child::slurp_file(m_dir / "log_full/stderr.txt");
        reference = std::min(reference, Clock::now() - start);
    }
    const auto full = problem_counts(m_dir, "full");
    ASSERT_EQ(full.size(), 24u);

    std::mt19937 rng(kSeed);
    const int trials = env_int("MMT_KILL_TRIALS", 8);
    int landed = 0;
    for (int trial = 0; trial < trials; ++trial) {
        landed += kill_at_random(args("data.json"), reference, rng, 0.02, 0.25, "log_" + std::to_string(trial));
        std::map<std::string, int> left;
        ASSERT_NO_THROW(left = problem_counts(m_dir, "data")) << "trial " << trial;
        for (const auto& [key, count] : left) {
            EXPECT_EQ(count, 1) << "trial " << trial << ": duplicated " << key;
            EXPECT_TRUE(full.count(key)) << "trial " << trial << ": not in the full run: " << key;
        }
    }
    std::cout << "collect: " << landed << " of " << trials << " kills landed mid-run\n";
    EXPECT_GE(landed, trials / 2) << "too few kills landed for the test to mean much";

    ASSERT_EQ(run_child(args("data.json"), m_dir / "log_final"), 0) << Child::slurp_file(m_dir / "log_final/stderr.txt");
    EXPECT_EQ(problem_counts(m_dir, "data"), full);
    EXPECT_EQ(temp_files(m_dir), "") << "temporary files of killed runs were left behind";
    EXPECT_EQ(problems_without_meta(m_dir, "data"), "") << "problems the sidecars do not record";
}

TEST_F(KillSafety, TrainKilledAtRandomMomentsNeverLeavesABrokenModelAndReruns) {
    const auto args = [&](const std::string& model, const std::string& logs) {
        return std::vector<std::string>{"--device", "cpu", "train", "--dataset",
                                        std::string(MMT_SOURCE_DIR) + "/data/datasets/sample_cpu.json",
                                        "--recipe", "quick", "--output", (m_dir / model).string(), "--log-dir", (m_dir / logs).string(),
                                        "--model-type", "base", "--hidden-dims", "16,8", "--num-epochs", "15"};
    };
    const auto start = Clock::now();
    ASSERT_EQ(run_child(args("ref.pt", "ref_logs"), m_dir / "log_ref"), 0)
        << Child::slurp_file(m_dir / "log_ref/stderr.txt");
    const auto reference = Clock::now() - start;
    const std::string ref_model = Child::slurp_file(m_dir / "ref.pt");
    ASSERT_FALSE(ref_model.empty());

    std::mt19937 rng(kSeed + 1);
    const int trials = env_int("MMT_KILL_TRIALS", 8);
    int landed = 0;
    int models_seen = 0;
    for (int trial = 0; trial < trials; ++trial) {
        // Up to past the end, so that some kills land while the model is saved and some runs
        // finish, leaving a model the next kills must not damage.
        landed += kill_at_random(args("m.pt", "logs"), reference, rng, 0.1, 1.2, "log_" + std::to_string(trial));
        models_seen += fs::exists(m_dir / "m.pt");
        // The model is absent or whole: training is deterministic on the CPU for a seed,
        // so a whole file is byte for byte the reference run's.
        if (fs::exists(m_dir / "m.pt")) {
            EXPECT_EQ(Child::slurp_file(m_dir / "m.pt"), ref_model) << "trial " << trial;
            EXPECT_NO_THROW(model::Predictor::load(m_dir / "m.pt")) << "trial " << trial;
        }
        if (fs::exists(m_dir / "logs/test_metrics.json")) {
            EXPECT_TRUE(nlohmann::json::accept(Child::slurp_file(m_dir / "logs/test_metrics.json"))) << "trial " << trial;
        }
        if (fs::exists(m_dir / "logs/training_history.csv")) {
            const auto csv = Child::slurp_file(m_dir / "logs/training_history.csv");
            const auto ref_csv = Child::slurp_file(m_dir / "ref_logs/training_history.csv");
            EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), std::count(ref_csv.begin(), ref_csv.end(), '\n'))
                << "trial " << trial;
        }
    }
    std::cout << "train: " << landed << " of " << trials << " kills landed mid-run; " << models_seen
              << " trials left a model to check\n";
    EXPECT_GE(landed, trials / 4) << "too few kills landed for the test to mean much";

    ASSERT_EQ(run_child(args("m.pt", "logs"), m_dir / "log_final"), 0) << Child::slurp_file(m_dir / "log_final/stderr.txt");
    EXPECT_EQ(Child::slurp_file(m_dir / "m.pt"), ref_model);
    EXPECT_EQ(temp_files(m_dir), "");
    EXPECT_EQ(temp_files(m_dir / "logs"), "");
}

}  // namespace
}  // namespace mmt::testing
