#include "dense_net.hpp"

#include <limits>
#include <random>
#include <string>
#include <vector>

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

// Every path of the kernel, with narrow and wide tiles: 4-row tiles and leftover rows,
// 32-, 16-, 8- and 4-wide column tiles and leftover columns, the one-output dot product, inputs
// shorter and longer than a tile.
TEST(DenseNet, ProductMatchesAPlainTripleLoop) {
    std::mt19937 rng(7);
    for (bool wide : {false, true}) {
        for (std::size_t rows : {1u, 3u, 4u, 9u}) {
            for (std::size_t in : {1u, 10u, 17u, 40u}) {
                for (std::size_t out : {1u, 5u, 16u, 24u, 37u, 40u, 44u, 64u, 85u}) {
                    const auto x = random_values(rows * in, rng);
                    const auto w = random_values(in * out, rng);
                    auto y = random_values(rows * out, rng);
                    std::vector<double> expected(y.begin(), y.end());
                    for (std::size_t r = 0; r < rows; ++r) {
                        for (std::size_t o = 0; o < out; ++o) {
                            for (std::size_t i = 0; i < in; ++i) {
                                expected[r * out + o] += double(x[r * in + i]) * w[i * out + o];
                            }
                        }
                    }
                    accumulate_product(x.data(), in, rows, in, w.data(), out, y.data(), out, wide);
                    for (std::size_t j = 0; j < y.size(); ++j) {
                        ASSERT_NEAR(y[j], expected[j], 1e-4)
                            << (wide ? "wide " : "narrow ") << rows << "x" << in << "x" << out << " at " << j;
                    }
                }
            }
        }
    }
}

// Runs `dense` on the rows of x, expects the folded network's outputs and returns them.
std::vector<float> forward_matches_folded(const DenseNet& dense, const FoldedNet& folded, const at::Tensor& x,
                                          DenseScratch& scratch, const std::string& what) {
    const auto expected = folded.forward(x).reshape({-1}).contiguous();
    std::vector<float> out(static_cast<std::size_t>(x.size(0)));
    dense.forward(x.contiguous().data_ptr<float>(), out.size(), out.data(), scratch);
    for (std::size_t i = 0; i < out.size(); ++i) {
        EXPECT_NEAR(out[i], expected[static_cast<std::int64_t>(i)].item<float>(), 1e-4) << what << " row " << i;
    }
    return out;
}

// The float arrays must compute what the folded LibTorch network computes, for both
// architectures, with widths that are and are not multiples of the kernel's tiles.
TEST(DenseNet, MatchesTheFoldedNetwork) {
    for (auto type : {ModelType::base, ModelType::deep}) {
        RuntimeNet net = test::trained_looking_net(type, {48, 20, 16}, 24, 32, 11, -1.0);
        torch::NoGradGuard no_grad;
        const FoldedNetwork plain = net->fold();
        const FoldedNet folded(plain, c10::Device(c10::kCPU));
        const DenseNet dense = dense_net_of(plain);
        const auto x = torch::randn({23, 32});
        DenseScratch scratch;
        const auto out = forward_matches_folded(dense, folded, x, scratch, to_string(type));
        // The scratch buffers are reused by the next call without changing its result.
        std::vector<float> again(23);
        dense.forward(x.contiguous().data_ptr<float>(), 23, again.data(), scratch);
        EXPECT_EQ(out, again);
    }
}

// An ensemble saved as one network: its hidden layers are block-diagonal, stored and
// multiplied block by block, with the same result as the folded network.
TEST(DenseNet, RunsAnEnsembleBlockByBlock) {
    std::vector<std::shared_ptr<RuntimeNetImpl>> members;
    for (std::uint64_t seed : {3u, 4u, 5u}) {
        members.push_back(test::trained_looking_net(ModelType::base, {40, 24, 16}, 24, 32, seed, -1.0).ptr());
    }
    RuntimeNet net(RuntimeNetImpl::average_of(members));
    net->eval();
    torch::NoGradGuard no_grad;
    const FoldedNetwork plain = net->fold();
    const FoldedNet folded(plain, c10::Device(c10::kCPU));
    const DenseNet dense = dense_net_of(plain);
    ASSERT_EQ(dense.chain.size(), 4u);
    EXPECT_EQ(dense.chain[0].groups, 1u);  // every member reads all the features
    EXPECT_EQ(dense.chain[1].groups, 3u);
    EXPECT_EQ(dense.chain[1].weight.size(), 3u * 40u * 24u);
    EXPECT_EQ(dense.chain[2].groups, 3u);
    EXPECT_EQ(dense.chain[3].groups, 1u);  // the mean of the members
    DenseScratch scratch;
    forward_matches_folded(dense, folded, torch::randn({21, 32}), scratch, "ensemble");
}

// A dense layer stays dense; one with zero blocks is split and computes the same product.
TEST(DenseNet, SplitsOnlyExactlyZeroBlocks) {
    std::mt19937 rng(11);
    auto weight = random_values(6 * 4, rng);
    EXPECT_EQ(make_dense_layer(6, 4, weight, std::vector<float>(4, 0.0f), false, true).groups, 1u);
    for (std::size_t i = 0; i < 6; ++i) {
        for (std::size_t o = 0; o < 4; ++o) {
            if (i / 3 != o / 2) weight[i * 4 + o] = 0.0f;
        }
    }
    EXPECT_EQ(make_dense_layer(6, 4, weight, std::vector<float>(4, 0.0f), false, false).groups, 1u);
    const DenseLayer split = make_dense_layer(6, 4, weight, std::vector<float>(4, 0.5f), false, true);
    ASSERT_EQ(split.groups, 2u);
    DenseNet net;
    net.chain.push_back(make_dense_layer(6, 6, random_values(36, rng), std::vector<float>(6, 0.0f), false, false));
    net.chain.push_back(split);
    net.chain.push_back(make_dense_layer(4, 1, std::vector<float>(4, 1.0f), {0.0f}, false, false));
    DenseNet dense_net = net;
    dense_net.chain[1] = make_dense_layer(6, 4, weight, std::vector<float>(4, 0.5f), false, false);
    const auto x = random_values(5 * 6, rng);
    std::vector<float> a(5), b(5);
    DenseScratch scratch;
    net.forward(x.data(), 5, a.data(), scratch);
    dense_net.forward(x.data(), 5, b.data(), scratch);
    for (std::size_t r = 0; r < 5; ++r) EXPECT_NEAR(a[r], b[r], 1e-5) << "row " << r;
}

// Subnormal weights and biases (a trained model had 202) are stored as zeros; the rest as given.
TEST(DenseNet, FlushesSubnormalWeightsToZero) {
    const float tiny = std::numeric_limits<float>::denorm_min() * 7.0f;
    const float smallest_normal = std::numeric_limits<float>::min();
    const DenseLayer layer =
        make_dense_layer(2, 2, {tiny, -tiny, smallest_normal, 0.25f}, {-tiny, 1.5f}, false, false);
    EXPECT_EQ(layer.weight, (std::vector<float>{0.0f, 0.0f, smallest_normal, 0.25f}));
    EXPECT_EQ(layer.bias, (std::vector<float>{0.0f, 1.5f}));
}

}  // namespace
}  // namespace mmt::model
