// Outputs that cannot be written: an unwritable directory, a full disk (a file-size
// limit, which fails writes with EFBIG as a full disk fails them with ENOSPC) and a
// read-only existing output. Each run prints one clear `error:` line, exits non-zero and
// leaves every existing file as it was, with no temporary file behind.

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "child_process.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kNobody = 65534;

std::string sample() { return std::string(MMT_SOURCE_DIR) + "/data/datasets/sample_cpu.json"; }

// The first line of stderr that starts with "error: ".
std::string error_line(const std::string& err) {
    std::size_t at = err.rfind("error: ", 0) == 0 ? 0 : err.find("\nerror: ");
    if (at == std::string::npos) return {};
    if (at != 0) ++at;
    return err.substr(at, err.find('\n', at) - at);
}

// Whether a child can become `uid` (root in a container may lack CAP_SETUID).
bool can_drop_to(int uid) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(::setgid(static_cast<gid_t>(uid)) == 0 && ::setuid(static_cast<uid_t>(uid)) == 0 ? 0 : 1);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool has_temp_file(const fs::path& dir) {
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (entry.path().filename().string().find(".tmp") != std::string::npos) return true;
    }
    return false;
}

class OutputFailure : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fresh_dir("mmt_output_failure");
        fs::permissions(m_dir, fs::perms::all);  // the unprivileged child writes its logs here
        m_out = m_dir / "out";
        fs::create_directories(m_out);
    }
    void TearDown() override {
        fs::permissions(m_out, fs::perms::owner_all, fs::perm_options::add);
        fs::remove_all(m_dir);
    }

    // Runs the binary; expects a non-zero exit, an error line naming `subject` and no
    // change to anything under out/.
    void expect_refused(const std::vector<std::string>& args, const std::string& subject, const ChildLimits& limits,
                        const std::string& why) {
        const auto before = snapshot(m_out);
        const auto log = m_dir / ("log_" + std::to_string(m_runs++));
        Child child(args, log, limits);
        const int code = child.wait();
        ASSERT_NE(code, 126) << "could not apply the limits in the child";
        EXPECT_NE(code, 0) << why;
        EXPECT_LT(code, 128) << why << ": ended by a signal\n" << child.err();
        const auto line = error_line(child.err());
        EXPECT_FALSE(line.empty()) << why << ": no error line in\n" << child.err();
        EXPECT_NE(line.find(subject), std::string::npos) << why << ": " << line;
        EXPECT_EQ(snapshot(m_out), before) << why << ": files under out/ changed";
        EXPECT_FALSE(has_temp_file(m_out)) << why;
    }

    std::vector<std::string> collect(const fs::path& output) const {
        return {"--device", "cpu", "collect", "--num-shapes", "6", "--min-size", "16", "--max-size", "48",
                "--warmup", "0", "--repeat", "1", "--quiet", "--output", output.string()};
    }
    std::vector<std::string> train(const fs::path& model, const fs::path& logs) const {
        return {"--device", "cpu", "train", "--recipe", "quick", "--dataset", m_sample, "--output", model.string(), "--log-dir",
                logs.string(), "--model-type", "base", "--hidden-dims", "8", "--num-epochs", "2"};
    }
    std::vector<std::string> convert(const fs::path& output_dir) const {
        return {"convert", "--input-files", m_sample, "--output-dir", output_dir.string(), "--overwrite"};
    }

    fs::path m_dir;
    fs::path m_out;
    std::string m_sample = sample();
    int m_runs = 0;
};

TEST_F(OutputFailure, AnUnwritableDirectoryIsAnErrorAndNothingIsWritten) {
    std::ofstream(m_out / "keep.json") << "{}";
    fs::permissions(m_out, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                               fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
    ChildLimits limits;
    if (::geteuid() == 0) {
        if (!can_drop_to(kNobody)) GTEST_SKIP() << "running as root without the right to setuid";
        // Root ignores directory modes, so the child drops to an unprivileged user; it runs
        // copies of the binary (with the training library beside it, where the binary looks
        // for it) and the dataset, since the checkout may not be readable to it.
        limits.run_as_uid = kNobody;
        limits.binary = (m_dir / "matmul_toolkit").string();
        fs::copy_file(MMT_CLI_PATH, limits.binary);
        fs::copy_file(fs::path(MMT_CLI_PATH).parent_path() / "libmmt_train.so", m_dir / "libmmt_train.so");
        fs::copy_file(m_sample, m_dir / "sample_cpu.json");
        m_sample = (m_dir / "sample_cpu.json").string();
    }
    expect_refused(collect(m_out / "data.json"), "cannot write", limits, "collect");
    expect_refused(train(m_out / "m.pt", m_out / "logs"), "cannot write", limits, "train");
    expect_refused(convert(m_out), m_out.string(), limits, "convert");
}

TEST_F(OutputFailure, AFullDiskIsAnErrorAndTheExistingOutputsStayWhole) {
    // Outputs from an earlier run, which the failed runs must leave alone.
    ASSERT_EQ(run_child(train(m_out / "m.pt", m_out / "logs"), m_dir / "log_setup"), 0);
    ASSERT_EQ(run_child(convert(m_out), m_dir / "log_setup2"), 0);
    ASSERT_EQ(run_child(collect(m_out / "data.json"), m_dir / "log_setup3"), 0);

    ChildLimits limits;
    limits.max_file_bytes = 2048;  // below every output's size, above the logs' size
    expect_refused(train(m_out / "m.pt", m_out / "logs"), "m.pt: cannot write", limits, "train");
    expect_refused(convert(m_out), "cannot write", limits, "convert");
    // collect saves a file's sidecar first (kill-safety), so that is the write that fails.
    expect_refused(collect(m_out / "fresh.json"), "fresh.json.meta.json: cannot write", limits, "collect");
}

TEST_F(OutputFailure, AReadOnlyExistingOutputIsNotReplaced) {
    ASSERT_EQ(run_child(train(m_out / "m.pt", m_out / "logs"), m_dir / "log_setup"), 0);
    ASSERT_EQ(run_child(convert(m_out), m_dir / "log_setup2"), 0);
    ASSERT_EQ(run_child(collect(m_out / "data.json"), m_dir / "log_setup3"), 0);
    for (const auto& entry : fs::recursive_directory_iterator(m_out)) {
        if (entry.is_regular_file()) fs::permissions(entry.path(), fs::perms::owner_read | fs::perms::group_read |
                                                                       fs::perms::others_read);
    }
    expect_refused(train(m_out / "m.pt", m_out / "logs"), "read-only", {}, "train");
    expect_refused(convert(m_out), "read-only", {}, "convert");
    // Refused before measuring: resuming would otherwise time two more problems first.
    auto more = collect(m_out / "data.json");
    more[4] = "8";  // --num-shapes
    expect_refused(more, "data.json: is read-only", {}, "collect");
}

}  // namespace
}  // namespace mmt::testing
