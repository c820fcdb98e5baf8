// Output paths: torch-diode's chunk names, extensions, and writability checks.

#include "matmul_toolkit/collect/output_files.hpp"

#include <fstream>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

TEST(ChunkPath, AppendsTheIndexBeforeTheExtension) {
    EXPECT_EQ(chunk_path("matmul_dataset.json", 1), fs::path("matmul_dataset_1.json"));
    EXPECT_EQ(chunk_path("runs/a.b.msgpack", 12), fs::path("runs/a.b_12.msgpack"));
}

TEST(ResolveOutputPath, KeepsKnownExtensionsAndAddsTheFormatsOtherwise) {
    EXPECT_EQ(resolve_output_path("x.json", "msgpack"), fs::path("x.json"));
    EXPECT_EQ(resolve_output_path("dir/x", "msgpack"), fs::path("dir/x.msgpack"));
    EXPECT_EQ(resolve_output_path("x", "json"), fs::path("x.json"));
    EXPECT_THROW(resolve_output_path("x.csv", "json"), core::InputError);
    EXPECT_THROW(resolve_output_path("", "json"), core::InputError);
}

class OutputDir : public ::testing::Test {
protected:
    void SetUp() override {
        m_dir = fs::temp_directory_path() / ("mmt_output_files_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    fs::path m_dir;
};

TEST_F(OutputDir, ExistingChunksStopAtTheFirstGap) {
    for (int i : {1, 2, 4}) std::ofstream(chunk_path(m_dir / "d.json", i)) << "{}";
    const auto chunks = existing_chunks(m_dir / "d.json");
    EXPECT_EQ(chunks, (std::vector<fs::path>{m_dir / "d_1.json", m_dir / "d_2.json"}));
    EXPECT_TRUE(existing_chunks(m_dir / "other.json").empty());
}

TEST_F(OutputDir, WritableCheckCreatesMissingDirectoriesAndLeavesNothingBehind) {
    check_writable_directory(m_dir / "a" / "b", "--output");
    EXPECT_TRUE(fs::is_directory(m_dir / "a" / "b"));
    EXPECT_TRUE(fs::is_empty(m_dir / "a" / "b"));
}

TEST_F(OutputDir, WritableCheckFailsUnderARegularFile) {
    std::ofstream(m_dir / "file") << "x";
    try {
        check_writable_directory(m_dir / "file" / "sub", "--trace-dir");
        FAIL() << "a directory under a file was accepted";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--trace-dir");
    }
}

}  // namespace
}  // namespace mmt::collect
