#pragma once
/// From a Dataset to the unit the model learns from: one problem (hardware, op key,
/// shape) with its timed configs, plus the seeded split of problems into train,
/// validation and test sets (a problem's configs never appear in two sets).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset.hpp"

namespace mmt::model {

/// One problem and its timed kernel configs.
struct ProblemGroup {
    std::string hardware;
    std::string op_key;  ///< "mm", "addmm_nt", ... (the layout rides in the key)
    core::MMShape shape;
    /// Timed configs the model learns from and ranks (vendor-library entries excluded
    /// unless with_reference_rows() added the fastest one).
    std::vector<core::TimedConfig> timings;
    /// Fastest vendor-library time (`aten_*` entry) when the dataset has one.
    std::optional<double> reference_ms;
    /// That fastest vendor-library entry itself.
    std::optional<core::TimedConfig> reference;
};

/// True for the vendor-library entries (config name starting with "aten_"): the
/// collection's own test.
using collect::is_reference_config;

/// The groups with each one's fastest vendor-library entry appended to its timings, so a
/// model learns and ranks it beside the kernel configs, as max-autotune weighs ATen beside
/// the Triton templates. Its tile fields are all 1 (collect::reference_config), values no
/// kernel config has, which the features carry.
std::vector<ProblemGroup> with_reference_rows(std::vector<ProblemGroup> problems);

/// Groups a dataset by problem. Throws core::InputError naming `source` when a time is
/// NaN, infinite or not positive, or an op key is unknown. Problems whose only entries
/// are vendor-library entries are dropped.
std::vector<ProblemGroup> group_problems(const core::Dataset& dataset, const std::string& source);

/// Filters the dataset by hardware and op (nullopt keeps all; a bare op also selects its
/// layouts), then groups it. Throws core::InputError naming `source` when nothing is left,
/// listing the hardware and ops the dataset does have.
std::vector<ProblemGroup> select_dataset_problems(const core::Dataset& dataset, const std::string& source,
                                                  const std::optional<std::string>& hardware,
                                                  const std::optional<std::string>& op);

/// Total timed configs over the groups.
std::size_t count_rows(const std::vector<ProblemGroup>& problems);

/// Indices of problems per split.
struct ProblemSplit {
    std::vector<std::size_t> train;
    std::vector<std::size_t> validation;
    std::vector<std::size_t> test;
};

/// Shuffles problem indices with `seed` and cuts them: validation and test get
/// round(fraction · n) problems each, at least one (test none when its fraction is 0);
/// train gets the rest. The validation problems depend only on the seed and the
/// validation fraction. Throws core::InputError when a split would be empty.
ProblemSplit split_by_problem(std::size_t num_problems, double validation_fraction,
                              double test_fraction, std::uint64_t seed);

/// K-fold cross-validation by problem: the seeded order of split_by_problem cut into
/// `folds` test sets (every problem in exactly one); of each fold's other problems,
/// round(validation_fraction · rest) go to validation (early stopping), the others to
/// train. Throws core::InputError on fewer than 2 folds or too few problems.
std::vector<ProblemSplit> k_fold_splits(std::size_t num_problems, int folds, double validation_fraction,
                                        std::uint64_t seed);

/// The problems at `indices`, in that order.
std::vector<ProblemGroup> select_problems(const std::vector<ProblemGroup>& problems,
                                          const std::vector<std::size_t>& indices);

}  // namespace mmt::model
