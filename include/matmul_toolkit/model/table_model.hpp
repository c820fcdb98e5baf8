#pragma once
/// Tabular kernel models (train-table, predict-table): for any kernel, a small MLP from
/// feature columns to a target column (e.g. a duration in ns), with a standard scaler in
/// front. The portable JSON form holds per layer the weights as scikit-learn's MLPRegressor
/// keeps them (coefs: in x out, intercepts) and the scaler's mean and std, so numpy or
/// scikit-learn load it in a few lines, and weights exported from scikit-learn that way
/// load here (--init-from). Numbers are written with 17 significant digits: a file read and
/// written again is the same file, byte for byte.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mmt::model {

struct TableLayer {
    std::size_t inputs = 0;
    std::size_t outputs = 0;
    std::vector<double> coefs;       ///< inputs x outputs, row-major (scikit-learn's coefs_[i])
    std::vector<double> intercepts;  ///< outputs (intercepts_[i])
    std::string activation;          ///< "relu" (hidden layers) or "identity" (the output)
};

/// One model: standardise the features, run the layers, undo the target's scaling.
struct TableMlp {
    std::string group;  ///< the --group-by value it was trained on; empty without grouping
    std::vector<double> feature_mean, feature_std;
    double target_mean = 0.0;  ///< the output is out · target_std + target_mean
    double target_std = 1.0;
    std::vector<TableLayer> layers;

    /// One prediction per row of `rows` (row-major, feature_mean.size() columns).
    std::vector<double> predict(const std::vector<double>& rows) const;
};

/// A file of models: the columns they read and write, and one model per group.
struct TableModelFile {
    std::vector<std::string> features;
    std::string target;
    std::string group_by;  ///< empty: one model for every row
    std::vector<TableMlp> models;
};

struct TableTrainOptions {
    std::vector<int> hidden{100, 50};
    int epochs = 200;
    int batch_size = 256;
    double learning_rate = 1e-3;
    double weight_decay = 0.0;
    double test_fraction = 0.2;
    std::uint64_t seed = 42;
};

/// Held-out quality of one model (in the target's units).
struct TableModelReport {
    std::string group;
    std::size_t train_rows = 0;
    std::size_t test_rows = 0;
    double r2 = 0.0;
    double rmse = 0.0;
};

/// Throws core::InputError naming the option when a value is out of range.
void validate_table_options(const TableTrainOptions& options);

/// Trains one model on `x` (rows x features, row-major) and `y`: rows split with the seed
/// (test_fraction held out, at least one row each side), scaler from the training rows,
/// Adam on the MSE of the standardised target in float64. `init` (optional) gives the
/// starting weights and scaler (its layer sizes must match); with epochs 0 the model is
/// `init` unchanged. Throws core::InputError on fewer than 4 rows or mismatched sizes.
TableMlp train_table_mlp(const std::vector<double>& x, const std::vector<double>& y, std::size_t features,
                         const TableTrainOptions& options, const TableMlp* init, TableModelReport& report);

/// R² and RMSE of `model` on rows x/y.
void score_table_mlp(const TableMlp& model, const std::vector<double>& x, const std::vector<double>& y,
                     TableModelReport& report);

std::string table_models_to_json(const TableModelFile& file);
/// Throws core::InputError(subject, ...) on a malformed file (missing field, sizes that do
/// not match, an unknown activation).
TableModelFile table_models_from_json(const std::string& text, const std::string& subject);

}  // namespace mmt::model
