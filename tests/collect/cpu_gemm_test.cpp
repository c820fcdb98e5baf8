// The CPU GEMM: Triton's grouped tile order, and results equal to a plain triple loop for
// every tile of the EXHAUSTIVE space, every layout, mm, addmm and bmm, on odd sizes.

#include "matmul_toolkit/collect/cpu_gemm.hpp"

#include <cmath>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/problem_generator.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

TEST(GroupedTile, VisitsGroupMRowsColumnByColumn) {
    // 3 x 2 tiles, group_m 2: rows 0-1 column by column, then row 2 (a group of one).
    const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
        {0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {2, 1}};
    for (std::int64_t pid = 0; pid < 6; ++pid) EXPECT_EQ(grouped_tile(pid, 3, 2, 2), expected[pid]);
}

TEST(GroupedTile, IsAPermutationOfAllTiles) {
    for (int group_m : {1, 3, 8}) {
        std::set<std::pair<std::int64_t, std::int64_t>> seen;
        for (std::int64_t pid = 0; pid < 7 * 5; ++pid) seen.insert(grouped_tile(pid, 7, 5, group_m));
        EXPECT_EQ(seen.size(), 35u) << "group_m " << group_m;
    }
}

// The operands of one problem with values that make every element distinct.
struct Operands {
    std::vector<float> a, b, bias;
    CpuGemmArgs args;

    Operands(const Problem& p, float alpha = 1.0f, float beta = 1.0f) {
        const auto& s = p.shape;
        a.resize(static_cast<std::size_t>(s.B * s.M * s.K));
        b.resize(static_cast<std::size_t>(s.B * s.K * s.N));
        bias.resize(static_cast<std::size_t>(s.N));
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.1f + static_cast<float>(i % 97) / 97.0f;
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.1f + static_cast<float>(i % 89) / 89.0f;
        for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = 1.0f + static_cast<float>(i);
        args.batch = s.B;
        args.m = s.M;
        args.n = s.N;
        args.k = s.K;
        args.a = a.data();
        args.a_stride = p.a_stride();
        args.b = b.data();
        args.b_stride = p.b_stride();
        args.bias = p.op == "addmm" ? bias.data() : nullptr;
        args.alpha = alpha;
        args.beta = beta;
    }
};

// C[b, i, j] = beta·bias[j] + alpha·Σ_k A[b, i, k]·B[b, k, j], straight from the strides.
std::vector<double> expected_result(const Operands& o) {
    const auto& g = o.args;
    std::vector<double> c(static_cast<std::size_t>(g.batch * g.m * g.n));
    for (std::int64_t b = 0; b < g.batch; ++b)
        for (std::int64_t i = 0; i < g.m; ++i)
            for (std::int64_t j = 0; j < g.n; ++j) {
                double sum = 0.0;
                for (std::int64_t k = 0; k < g.k; ++k)
                    sum += double(g.a[b * g.a_stride[0] + i * g.a_stride[1] + k * g.a_stride[2]]) *
                           double(g.b[b * g.b_stride[0] + k * g.b_stride[1] + j * g.b_stride[2]]);
                c[(b * g.m + i) * g.n + j] =
                    g.bias != nullptr ? g.beta * double(g.bias[j]) + g.alpha * sum : sum;
            }
    return c;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-4 * (std::abs(want[i]) + 1.0)) << what << " element " << i;
    }
}

CpuTile tile_of(const core::GemmConfig& c, std::int64_t k) {
    return {c.block_m, c.block_n, c.block_k, c.group_m, k % c.block_k == 0};
}

// Every distinct block_m x block_n x block_k of the EXHAUSTIVE space.
std::vector<core::GemmConfig> exhaustive_tiles() {
    std::vector<core::GemmConfig> tiles;
    std::set<std::array<int, 3>> seen;
    for (const auto& c : exhaustive_configs()) {
        if (seen.insert({c.block_m, c.block_n, c.block_k}).second) tiles.push_back(c);
    }
    return tiles;
}

class EveryTile : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryTile, MatchesTheTripleLoopOnOddSizesForMmAddmmAndBmm) {
    const std::string layout = GetParam();
    const std::vector<Problem> problems = {
        make_problem("mm", layout, 1, 37, 29, 45, "float32"),
        make_problem("addmm", layout, 1, 19, 53, 33, "float32"),
        make_problem("bmm", layout, 3, 21, 17, 27, "float32"),
    };
    const auto tiles = exhaustive_tiles();
    ASSERT_EQ(tiles.size(), 125u);
    for (const auto& p : problems) {
        Operands o(p);
        const auto want = expected_result(o);
        std::vector<float> c(want.size());
        o.args.c = c.data();
        for (const auto& config : tiles) {
            CpuGemmWorkspace ws;
            const CpuTile tile = tile_of(config, p.shape.K);
            ws.reserve(tile);
            std::fill(c.begin(), c.end(), -1.0f);
            cpu_gemm(o.args, tile, ws);
            expect_close(c, want, describe_problem(p) + " " + describe_config(config));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, EveryTile, ::testing::Values("nn", "nt", "tn", "tt"));

TEST(CpuGemm, EvenKSkipsTheRemainderPathAndGivesTheSameResult) {
    const auto p = make_problem("mm", "nn", 1, 33, 31, 64, "float32");
    Operands o(p);
    const auto want = expected_result(o);
    std::vector<float> c(want.size());
    o.args.c = c.data();
    for (int bk : {16, 32, 64}) {
        const CpuTile tile{32, 32, bk, 8, true};
        CpuGemmWorkspace ws;
        ws.reserve(tile);
        cpu_gemm(o.args, tile, ws);
        expect_close(c, want, "block_k " + std::to_string(bk));
    }
}

TEST(CpuGemm, AddmmAppliesAlphaAndBeta) {
    const auto p = make_problem("addmm", "tn", 1, 23, 41, 19, "float32");
    Operands o(p, /*alpha=*/-0.5f, /*beta=*/2.0f);
    const auto want = expected_result(o);
    std::vector<float> c(want.size());
    o.args.c = c.data();
    const CpuTile tile{16, 32, 16, 4, false};
    CpuGemmWorkspace ws;
    ws.reserve(tile);
    cpu_gemm(o.args, tile, ws);
    expect_close(c, want, "alpha -0.5, beta 2");
    // Element (0, 0) by hand from its parts: 2·bias[0] - 0.5·Σ a·b.
    double sum = 0.0;
    for (int k = 0; k < 19; ++k) sum += double(o.a[k * 23]) * double(o.b[k * 41]);
    EXPECT_NEAR(c[0], 2.0 * 1.0 - 0.5 * sum, 1e-4);
}

TEST(CpuGemm, NaiveGemmMatchesTheTestsTripleLoop) {
    const auto p = make_problem("bmm", "nt", 2, 9, 7, 5, "float32");
    Operands o(p);
    const auto want = expected_result(o);
    std::vector<float> c(want.size());
    o.args.c = c.data();
    naive_gemm(o.args);
    expect_close(c, want, "naive");
}

TEST(CpuGemm, RejectsEvenKWhenKIsNotAMultipleAndNonPositiveTiles) {
    const auto p = make_problem("mm", "nn", 1, 8, 8, 40, "float32");
    Operands o(p);
    std::vector<float> c(64);
    o.args.c = c.data();
    CpuGemmWorkspace ws;
    const CpuTile even_k{16, 16, 32, 8, true};
    ws.reserve(even_k);
    EXPECT_THROW(cpu_gemm(o.args, even_k, ws), core::InputError);
    EXPECT_THROW(cpu_gemm(o.args, CpuTile{0, 16, 16, 8, false}, ws), core::InputError);
}

}  // namespace
}  // namespace mmt::collect
