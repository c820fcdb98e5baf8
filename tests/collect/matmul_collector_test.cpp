#include "matmul_toolkit/collect/matmul_collector.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

namespace fs = std::filesystem;

MatmulRecord row(const std::string& op, std::int64_t B, double time_ms) {
    MatmulRecord r;
    r.op = op;
    r.layout = op == "mm" ? "nt" : "nn";
    r.dtype = "bfloat16";
    r.B = B;
    r.M = 128;
    r.N = 256;
    r.K = 64;
    r.config.block_m = 64;
    r.config.block_n = 32;
    r.config.block_k = 16;
    r.config.num_stages = 3;
    r.config.num_warps = 4;
    r.time_ms = time_ms;
    return r;
}

class MatmulCollectorFiles : public ::testing::TestWithParam<std::string> {};

// Every field comes back as written, times to the last bit, in CSV and in JSON.
TEST_P(MatmulCollectorFiles, SaveAndLoadKeepEveryField) {
    MatmulCollector rows;
    rows.record(row("mm", 1, 0.1));
    rows.record(row("bmm", 8, 1.0 / 3.0));
    const auto path = fs::temp_directory_path() / ("mmt_matmul_collector" + GetParam());
    rows.save(path);
    const auto loaded = MatmulCollector::load(path);
    ASSERT_EQ(loaded.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        const auto &a = rows.records()[i], &b = loaded.records()[i];
        EXPECT_EQ(a.op, b.op);
        EXPECT_EQ(a.layout, b.layout);
        EXPECT_EQ(a.dtype, b.dtype);
        EXPECT_EQ(a.B, b.B);
        EXPECT_EQ(a.M, b.M);
        EXPECT_EQ(a.N, b.N);
        EXPECT_EQ(a.K, b.K);
        EXPECT_EQ(a.config.block_m, b.config.block_m);
        EXPECT_EQ(a.config.num_stages, b.config.num_stages);
        EXPECT_EQ(a.time_ms, b.time_ms);
    }
    fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Formats, MatmulCollectorFiles, ::testing::Values(".csv", ".json"));

TEST(MatmulCollector, RowsBecomeADatasetWhenWanted) {
    MatmulCollector rows;
    rows.record(row("mm", 1, 0.1));
    rows.record(row("mm", 1, 0.2));
    rows.record(row("bmm", 8, 0.3));
    const auto dataset = rows.to_dataset("NVIDIA H100");
    ASSERT_NE(dataset.find_hardware("NVIDIA H100"), nullptr);
    EXPECT_NE(dataset.find_hardware("NVIDIA H100")->find("mm_nt"), nullptr);
    EXPECT_NE(dataset.find_hardware("NVIDIA H100")->find("bmm"), nullptr);
}

TEST(MatmulCollector, BadRowsAreRefusedNamingTheField) {
    MatmulCollector rows;
    auto bad = row("mm", 1, 0.1);
    bad.dtype = "float8";
    EXPECT_THROW(rows.record(bad), core::InputError);
    bad = row("mm", 2, 0.1);  // mm has no batch
    EXPECT_THROW(rows.record(bad), core::InputError);
    bad = row("mm", 1, -1.0);
    EXPECT_THROW(rows.record(bad), core::InputError);
    bad = row("mm", 1, 0.1);
    bad.config.num_warps = 0;
    EXPECT_THROW(rows.record(bad), core::InputError);
    EXPECT_EQ(rows.size(), 0u);

    const auto csv = fs::temp_directory_path() / "mmt_matmul_collector_bad.csv";
    std::ofstream(csv) << "op,layout,dtype,B,M,N,K,block_m,block_n,block_k,group_m,num_stages,num_warps,time_ms\n"
                          "mm,nn,float16,1,64,64,64,32,32,16,8,2,4,0.5\n"
                          "mm,nn,float16,1,64,x,64,32,32,16,8,2,4,0.5\n";
    try {
        MatmulCollector::load(csv);
        FAIL();
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("row 2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(rows.save(fs::temp_directory_path() / "rows.txt"), core::InputError);
}

}  // namespace
}  // namespace mmt::collect
