#include "dense_net.hpp"

#include <random>

#include <gtest/gtest.h>
#include <torch/types.h>

#include "networks.hpp"
#include "trained_looking_net.hpp"

namespace mmt::model {
namespace {

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// Every path of the kernel: 4-row tiles and leftover rows, 16-wide column tiles and
// leftover columns, the one-output dot product, inputs shorter and longer than a tile.
TEST(DenseNet, ProductMatchesAPlainTripleLoop) {
    std::mt19937 rng(7);
    for (std::size_t rows : {1u, 3u, 4u, 9u}) {
        for (std::size_t in : {1u, 10u, 17u, 40u}) {
            for (std::size_t out : {1u, 5u, 16u, 37u}) {
                const auto x = random_values(rows * in, rng);
                const auto w = random_values(in * out, rng);
                auto y = random_values(rows * out, rng);
                std::vector<double> expected(y.begin(), y.end());
                for (std::size_t r = 0; r < rows; ++r) {
                    for (std::size_t o = 0; o < out; ++o) {
                        for (std::size_t i = 0; i < in; ++i) expected[r * out + o] += double(x[r * in + i]) * w[i * out + o];
                    }
                }
                accumulate_product(x.data(), rows, in, w.data(), out, y.data());
                for (std::size_t j = 0; j < y.size(); ++j) {
                    ASSERT_NEAR(y[j], expected[j], 1e-4) << rows << "x" << in << "x" << out << " at " << j;
                }
            }
        }
    }
}

// The float arrays must compute what the folded LibTorch network computes, for both
// architectures, with widths that are and are not multiples of the kernel's tiles.
TEST(DenseNet, MatchesTheFoldedNetwork) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        RuntimeNet net = test::trained_looking_net(type, {48, 20, 16}, 24, 32, 11, -1.0);
        torch::NoGradGuard no_grad;
        const FoldedNet folded = net->fold();
        const DenseNet dense = folded.to_dense();
        const auto x = torch::randn({23, 32});
        const auto expected = folded.forward(x).reshape({-1}).contiguous();
        std::vector<float> out(23);
        DenseScratch scratch;
        dense.forward(x.contiguous().data_ptr<float>(), 23, out.data(), scratch);
        for (std::size_t i = 0; i < out.size(); ++i) {
            EXPECT_NEAR(out[i], expected[static_cast<std::int64_t>(i)].item<float>(), 1e-4) << to_string(type) << " row " << i;
        }
        // The scratch buffers are reused by the next call without changing its result.
        std::vector<float> again(23);
        dense.forward(x.contiguous().data_ptr<float>(), 23, again.data(), scratch);
        EXPECT_EQ(out, again);
    }
}

}  // namespace
}  // namespace mmt::model
