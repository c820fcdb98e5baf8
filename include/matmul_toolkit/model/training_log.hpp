#pragma once
/// What training leaves in --log-dir: the per-epoch history as CSV, an SVG plot of the
/// training and validation loss, and the final test metrics as JSON.

#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/model/trainer.hpp"

namespace mmt::model {

/// "epoch,train_loss,validation_loss,seconds,rows_per_second,best" and one line per epoch.
std::string history_csv(const std::vector<EpochStats>& history);

/// A self-contained SVG (no scripts, no external files) of both losses per epoch on a
/// log scale, with the best epoch marked.
std::string loss_plot_svg(const std::vector<EpochStats>& history, int best_epoch);

/// The test split's metrics plus the split sizes and the best epoch, as JSON.
std::string test_metrics_json(const TrainResult& result);

/// Writes training_history.csv, training_loss.svg and test_metrics.json under `log_dir`
/// (created when missing), each atomically. Returns the paths written.
std::vector<std::filesystem::path> write_training_logs(const TrainResult& result,
                                                       const std::filesystem::path& log_dir);

/// cv_metrics.json: per fold its sizes, best epoch, seconds and held-out report, then the
/// pooled report over all folds.
std::string cross_validation_json(const CrossValidationResult& result);

/// cv_predictions.csv: one line per held-out timing (fold, problem, op, dtype, shape,
/// config, measured and predicted ms), for studying the misses that set the tail.
std::string cross_validation_predictions_csv(const CrossValidationResult& result);

/// Writes cv_metrics.json and cv_predictions.csv into `log_dir` (created if needed), each
/// atomically; returns the metrics file's path.
std::filesystem::path write_cross_validation_log(const CrossValidationResult& result,
                                                 const std::filesystem::path& log_dir);

}  // namespace mmt::model
