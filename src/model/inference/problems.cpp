#include "matmul_toolkit/model/problems.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

std::string describe(const std::string& hardware, const std::string& op,
                     const core::MMShape& shape, const core::GemmConfig& config) {
    std::ostringstream out;
    out << hardware << " / " << op << " B=" << shape.B << " M=" << shape.M << " N=" << shape.N
        << " K=" << shape.K << " " << shape.M_dtype << " / config " << config.name << " ("
        << config.block_m << "x" << config.block_n << "x" << config.block_k << ")";
    return out.str();
}

}  // namespace

std::vector<ProblemGroup> group_problems(const core::Dataset& dataset, const std::string& source) {
    std::vector<ProblemGroup> problems;
    for (const auto& hardware : dataset.hardware()) {
        for (const auto& operation : hardware.operations) {
            try {
                core::parse_op_key(operation.name);
            } catch (const core::InputError& e) {
                throw core::InputError(source, e.what());
            }
            for (const auto& problem : operation.problems) {
                ProblemGroup group;
                group.hardware = hardware.name;
                group.op_key = operation.name;
                group.shape = problem.shape;
                for (const auto& timed : problem.timed_configs) {
                    if (!std::isfinite(timed.time_ms) || timed.time_ms <= 0.0) {
                        std::ostringstream what;
                        what << "time " << timed.time_ms << " ms is not a positive finite number ("
                             << describe(hardware.name, operation.name, problem.shape, timed.config)
                             << ")";
                        throw core::InputError(source, what.str());
                    }
                    if (is_reference_config(timed.config)) {
                        if (!group.reference_ms || timed.time_ms < *group.reference_ms) {
                            group.reference_ms = timed.time_ms;
                            group.reference = timed;
                        }
                    } else {
                        group.timings.push_back(timed);
                    }
                }
                if (!group.timings.empty()) problems.push_back(std::move(group));
            }
        }
    }
    return problems;
}

std::vector<ProblemGroup> with_reference_rows(std::vector<ProblemGroup> problems) {
    for (auto& group : problems) {
        if (group.reference) group.timings.push_back(*group.reference);
    }
    return problems;
}

std::vector<ProblemGroup> select_dataset_problems(const core::Dataset& dataset, const std::string& source,
                                                  const std::optional<std::string>& hardware,
                                                  const std::optional<std::string>& op) {
    auto problems = group_problems(dataset.filter(hardware, op), source);
    if (!problems.empty()) return problems;

    std::ostringstream what;
    what << "no timed kernel configs";
    if (hardware || op) {
        what << " after the filters";
        if (hardware) what << " --hardware-name '" << *hardware << "'";
        if (op) what << " --op-name '" << *op << "'";
    }
    what << " (vendor-library aten_* entries alone make no problem)";
    if (dataset.empty()) {
        what << "; the dataset is empty";
    } else {
        std::set<std::string> ops;
        what << "; the dataset has hardware";
        for (const auto& hw : dataset.hardware()) {
            what << " '" << hw.name << "'";
            for (const auto& operation : hw.operations) ops.insert(operation.name);
        }
        what << " and ops";
        for (const auto& name : ops) what << " " << name;
    }
    throw core::InputError(source, what.str());
}

std::size_t count_rows(const std::vector<ProblemGroup>& problems) {
    std::size_t rows = 0;
    for (const auto& p : problems) rows += p.timings.size();
    return rows;
}

namespace {

// Fisher-Yates with mt19937_64 drawn by hand: std::shuffle's algorithm differs between
// standard libraries, and the same seed must give the same split everywhere.
std::vector<std::size_t> seeded_order(std::size_t count, std::uint64_t seed) {
    std::vector<std::size_t> order(count);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::mt19937_64 rng(seed);
    for (std::size_t i = count; i > 1; --i) {
        const std::size_t j = static_cast<std::size_t>(rng() % i);
        std::swap(order[i - 1], order[j]);
    }
    return order;
}

void sort_split(ProblemSplit& split) {
    std::sort(split.train.begin(), split.train.end());
    std::sort(split.validation.begin(), split.validation.end());
    std::sort(split.test.begin(), split.test.end());
}

}  // namespace

ProblemSplit split_by_problem(std::size_t num_problems, double validation_fraction,
                              double test_fraction, std::uint64_t seed) {
    // A test fraction of 0 trains on the problems a test split would hold, for a final
    // model whose held-out quality --folds has already measured.
    if (!(validation_fraction > 0.0) || !(test_fraction >= 0.0) || validation_fraction + test_fraction >= 1.0) {
        throw core::InputError("--validation-fraction/--test-fraction",
                               "validation must be positive, test positive or 0, and together below 1");
    }
    const std::size_t needed = test_fraction > 0.0 ? 3 : 2;
    if (num_problems < needed) {
        throw core::InputError("dataset", "only " + std::to_string(num_problems) +
                                              " problem(s) after filters; training needs at least " +
                                              std::to_string(needed) + " (one for each of the " +
                                              (needed == 3 ? "train, validation and test" : "train and validation") +
                                              " splits)");
    }
    const auto n = static_cast<double>(num_problems);
    const std::size_t n_val = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(validation_fraction * n)));
    const std::size_t n_test =
        test_fraction > 0.0 ? std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(test_fraction * n))) : 0;
    if (n_val + n_test >= num_problems) {
        throw core::InputError("dataset", "only " + std::to_string(num_problems) +
                                              " problems: too few to split into train, validation "
                                              "and test with these fractions");
    }

    const std::vector<std::size_t> order = seeded_order(num_problems, seed);
    ProblemSplit split;
    split.validation.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_val));
    split.test.assign(order.begin() + static_cast<std::ptrdiff_t>(n_val),
                      order.begin() + static_cast<std::ptrdiff_t>(n_val + n_test));
    split.train.assign(order.begin() + static_cast<std::ptrdiff_t>(n_val + n_test), order.end());
    sort_split(split);
    return split;
}

std::vector<ProblemSplit> k_fold_splits(std::size_t num_problems, int folds, double validation_fraction,
                                        std::uint64_t seed) {
    if (folds < 2) throw core::InputError("--folds", "must be at least 2");
    if (validation_fraction <= 0.0 || validation_fraction >= 1.0) {
        throw core::InputError("--validation-fraction", "must be between 0 and 1");
    }
    // Each fold needs a test problem, and its rest a validation and a training problem.
    if (num_problems < static_cast<std::size_t>(folds) || num_problems < 3) {
        throw core::InputError("dataset", "only " + std::to_string(num_problems) + " problem(s) after filters; " +
                                              std::to_string(folds) + "-fold cross-validation needs at least " +
                                              std::to_string(std::max(folds, 3)));
    }
    const std::vector<std::size_t> order = seeded_order(num_problems, seed);
    std::vector<ProblemSplit> splits(static_cast<std::size_t>(folds));
    for (std::size_t f = 0; f < splits.size(); ++f) {
        std::vector<std::size_t> rest;
        for (std::size_t i = 0; i < order.size(); ++i) {
            (i % splits.size() == f ? splits[f].test : rest).push_back(order[i]);
        }
        const std::size_t n_val = std::min(
            rest.size() - 1, std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(
                                                          validation_fraction * static_cast<double>(rest.size())))));
        splits[f].validation.assign(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n_val));
        splits[f].train.assign(rest.begin() + static_cast<std::ptrdiff_t>(n_val), rest.end());
        sort_split(splits[f]);
    }
    return splits;
}

std::vector<ProblemGroup> select_problems(const std::vector<ProblemGroup>& problems,
                                          const std::vector<std::size_t>& indices) {
    std::vector<ProblemGroup> out;
    out.reserve(indices.size());
    for (auto i : indices) out.push_back(problems.at(i));
    return out;
}

}  // namespace mmt::model
