// The training step the eager loop and the CUDA graph share (CPU here; the graph's replays
// against it are in training_step_graph_test.cpp).

#include "training_step.hpp"

#include <cmath>

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>

namespace mmt::model {
namespace {

TEST(WithinProblemLoss, IgnoresEachProblemsOwnOffset) {
    const auto measured = torch::tensor({1.0f, 2.0f, 4.0f, 0.5f, 0.7f});
    const auto group = torch::tensor({0, 0, 0, 1, 1}, torch::kLong);
    // The right order and spacing inside each problem, each problem shifted as a whole.
    const auto shifted = measured + torch::tensor({3.0f, 3.0f, 3.0f, -2.0f, -2.0f});
    EXPECT_NEAR(within_problem_loss(shifted, measured, group, 2).item<double>(), 0.0, 1e-6);
    // Swapping two configs of problem 0 costs: offsets (-4/3, -1/3, 5/3) against (-1/3, -4/3, 5/3).
    const auto swapped = torch::tensor({2.0f, 1.0f, 4.0f, 0.5f, 0.7f});
    EXPECT_NEAR(within_problem_loss(swapped, measured, group, 2).item<double>(), 2.0 / 5.0, 1e-6);
}

TEST(WithinProblemLoss, MoreGroupNumbersThanProblemsChangeNothing) {
    // The trainer passes the batch size as the bound; numbers without rows must not turn
    // into 0 / 0 in the value or the gradient.
    const auto measured = torch::tensor({1.0f, 2.0f, 4.0f, 0.5f, 0.7f});
    const auto group = torch::tensor({0, 0, 0, 1, 1}, torch::kLong);
    const auto predicted = torch::tensor({1.5f, 1.0f, 3.0f, 0.9f, 0.2f}, torch::requires_grad());
    const auto exact = within_problem_loss(predicted, measured, group, 2);
    const auto bounded = within_problem_loss(predicted, measured, group, 64);
    EXPECT_FLOAT_EQ(exact.item<float>(), bounded.item<float>());
    bounded.backward();
    EXPECT_TRUE(torch::isfinite(predicted.grad()).all().item<bool>());
}

TEST(TrainingStep, WithoutRankingWeightIsOneMseStep) {
    ModelSpec spec;
    spec.hidden_dims = {8};
    spec.dropout_rate = 0.0;
    torch::manual_seed(3);
    RuntimeNet net(spec, 4);
    net->train();
    const auto x = torch::randn({10, 4}), y = torch::randn({10, 1});
    const auto index = torch::tensor({1, 3, 5, 7}, torch::kLong);
    at::Tensor expected;
    {
        torch::NoGradGuard no_grad;
        expected = torch::nn::functional::mse_loss(net->forward(x.index_select(0, index)), y.index_select(0, index));
    }
    const auto before = net->parameters().front().detach().clone();
    FlatAdam adam(net->parameters(), 1e-2, 0.0);
    const auto loss = training_step(net, adam, x, y, index, at::Tensor(), {});
    EXPECT_FALSE(loss.requires_grad());
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
    EXPECT_FALSE(torch::equal(before, net->parameters().front()));  // the step moved the weights
}

// A step with the ranking term at weight 2 returns the plain step's loss plus 2 × the term.
void expect_ranking_term_added(RankingLoss kind) {
    ModelSpec spec;
    spec.hidden_dims = {8};
    spec.dropout_rate = 0.0;
    const auto x = torch::randn({6, 4}), y = torch::randn({6, 1});
    const auto index = torch::tensor({0, 1, 2, 3, 4, 5}, torch::kLong);
    const auto group = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong);
    double losses[2];
    for (int with_ranking = 0; with_ranking < 2; ++with_ranking) {
        torch::manual_seed(3);
        RuntimeNet net(spec, 4);
        net->train();
        FlatAdam adam(net->parameters(), 1e-2, 0.0);
        const RankingTerm ranking{with_ranking ? 2.0 : 0.0, kind};
        losses[with_ranking] = training_step(net, adam, x, y, index, group, ranking).item<double>();
    }
    torch::manual_seed(3);
    RuntimeNet net(spec, 4);
    net->train();
    torch::NoGradGuard no_grad;
    const auto predicted = net->forward(x);
    const double term = (kind == RankingLoss::offset
                             ? within_problem_loss(predicted, y, group, 6)
                             : pairwise_ranking_loss(predicted, y, group, kind == RankingLoss::top))
                            .item<double>();
    EXPECT_GT(term, 0.0);
    EXPECT_NEAR(losses[1], losses[0] + 2.0 * term, 1e-5);
}

TEST(TrainingStep, RankingWeightAddsTheWithinProblemTerm) { expect_ranking_term_added(RankingLoss::offset); }

TEST(TrainingStep, RankingWeightAddsThePairwiseTerm) { expect_ranking_term_added(RankingLoss::pairwise); }

TEST(TrainingStep, RankingWeightAddsTheTopWeightedTerm) { expect_ranking_term_added(RankingLoss::top); }

// Problem 0: rows 0 and 1 are 1.0 apart in ln time, rows 2 and 1 0.98, rows 0 and 2 only
// 0.02 (within the 5 % margin: no pair); row 3, of problem 1, pairs with none of them.
TEST(TrainingStep, PairwiseRankingLossScoresThePredictedOrderOfDistinctTimes) {
    const auto group = torch::tensor({0, 0, 0, 1}, torch::kLong);
    const auto measured = torch::tensor({0.0, 1.0, 0.02, -5.0}).view({-1, 1});
    const double s = 30.0;
    auto softplus = [](double v) { return std::log1p(std::exp(v)); };
    // Right order: p1 - p0 = 1.0, p1 - p2 = 0.5.
    const auto right = pairwise_ranking_loss(torch::tensor({0.0, 1.0, 0.5, 9.0}).view({-1, 1}), measured, group);
    EXPECT_NEAR(right.item<double>(), (softplus(-s * 1.0) + softplus(-s * 0.5)) / s / 2.0, 1e-9);
    // Wrong order: p1 - p0 = -1.0, p1 - p2 = -0.5: about the size of the error.
    const auto wrong = pairwise_ranking_loss(torch::tensor({1.0, 0.0, 0.5, 9.0}).view({-1, 1}), measured, group);
    EXPECT_NEAR(wrong.item<double>(), (softplus(s * 1.0) + softplus(s * 0.5)) / s / 2.0, 1e-6);
    EXPECT_NEAR(wrong.item<double>(), 0.75, 1e-3);
    // No pair apart by more than the margin: 0.
    const auto none = pairwise_ranking_loss(torch::tensor({3.0, 1.0}).view({-1, 1}),
                                            torch::tensor({0.0, 0.01}).view({-1, 1}), torch::tensor({0, 0}, torch::kLong));
    EXPECT_EQ(none.item<double>(), 0.0);
}

// Problem 0 measured 0, 0.5, 1.0 (pairs 0<1, 0<2, 1<2), problem 1 measured 3, 4 (pair 3<4).
// The top weighting: a pair weighs 1 + 4 exp(-(y_faster - y_fastest) / 0.1).
TEST(TrainingStep, TopWeightedPairsWeighTheOrderNearEachProblemsFastest) {
    const auto group = torch::tensor({0, 0, 0, 1, 1}, torch::kLong);
    const auto measured = torch::tensor({0.0, 0.5, 1.0, 3.0, 4.0}).view({-1, 1});
    const double s = 30.0;
    auto softplus = [](double v) { return std::log1p(std::exp(v)); };
    // Every pair ordered wrong by its measured gap.
    const auto predicted = torch::tensor({1.0, 0.5, 0.0, 4.0, 3.0}).view({-1, 1});
    const double w_fastest = 5.0, w_second = 1.0 + 4.0 * std::exp(-5.0);
    const double expected = (w_fastest * softplus(s * 0.5) + w_fastest * softplus(s * 1.0) +
                             w_second * softplus(s * 0.5) + w_fastest * softplus(s * 1.0)) /
                            s / (3.0 * w_fastest + w_second);
    EXPECT_NEAR(pairwise_ranking_loss(predicted, measured, group, true).item<double>(), expected, 1e-6);
    // The same error costs more between the fastest two than between the slowest two.
    const auto top_wrong = torch::tensor({0.5, 0.0, 1.0, 3.0, 4.0}).view({-1, 1});
    const auto tail_wrong = torch::tensor({0.0, 1.0, 0.5, 3.0, 4.0}).view({-1, 1});
    EXPECT_GT(pairwise_ranking_loss(top_wrong, measured, group, true).item<double>(),
              2.0 * pairwise_ranking_loss(tail_wrong, measured, group, true).item<double>());
    EXPECT_NEAR(pairwise_ranking_loss(top_wrong, measured, group, false).item<double>(),
                pairwise_ranking_loss(tail_wrong, measured, group, false).item<double>(), 1e-9);
}

}  // namespace
}  // namespace mmt::model
