#pragma once
/// Training: split a dataset by problem, standardise features with training-split
/// statistics, fit the network with Adam and early stopping, evaluate on the test split.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/model/evaluator.hpp"
#include "matmul_toolkit/model/model_spec.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "matmul_toolkit/model/problems.hpp"

namespace mmt::model {

/// One epoch's numbers (losses are MSE of log(time ms)).
struct EpochStats {
    int epoch = 0;  ///< 1-based
    double train_loss = 0.0;
    double validation_loss = 0.0;
    double seconds = 0.0;          ///< wall time of the epoch (training + validation pass)
    double rows_per_second = 0.0;  ///< training rows processed per second of the training pass
    bool improved = false;         ///< validation loss is the best so far
    int member = 0;                ///< ensemble member (0-based) this epoch trained
    double learning_rate = 0.0;    ///< Adam's learning rate in this epoch
};

/// The within-problem term added to the MSE of ln time (TrainOptions::ranking_weight).
enum class RankingLoss {
    /// Each prediction's offset from its problem's mean prediction against the measured
    /// offset, squared.
    offset,
    /// Over the pairs of configs of one problem whose measured times differ by more than
    /// 5 %, a logistic loss on the predicted order.
    pairwise,
    /// pairwise, each pair weighted up by how close its faster config is to the problem's
    /// fastest: the order near the top decides the pick.
    top,
};

/// "offset" | "pairwise" | "top"; throws core::InputError("--ranking-loss", ...) otherwise.
RankingLoss parse_ranking_loss(const std::string& name);

/// What the networks' BatchNorm layers do while training (TrainOptions::batch_norm).
enum class BatchNormMode {
    /// Normalise with each training batch's mean and variance (torch-diode's training).
    batch,
    /// Stay a learnt per-unit scale and shift: the running statistics keep their initial 0
    /// and 1, so training and inference compute the same function.
    affine,
};

/// "batch" | "affine"; throws core::InputError("--batch-norm", ...) otherwise.
BatchNormMode parse_batch_norm_mode(const std::string& name);

struct TrainOptions {
    ModelSpec model;
    double learning_rate = 1e-3;
    double weight_decay = 1e-5;
    int batch_size = 64;
    int num_epochs = 100;
    int patience = 10;  ///< epochs without validation improvement before stopping
    /// After this many epochs without a better validation loss (and after each such run of
    /// epochs again), the learning rate is multiplied by lr_decay; 0: a constant rate.
    /// Off by default: on the H200 Inductor data it did not lower held-out regret
    /// (docs/experiments/, the training records).
    int lr_decay_after = 0;
    double lr_decay = 0.5;
    /// Keep an exponential moving average of the weights (this decay per step) and validate,
    /// keep and save the average instead of the weights; 0: the weights themselves.
    double weight_average = 0.0;
    double validation_fraction = 0.15;
    double test_fraction = 0.15;
    std::string device = "cpu";  ///< "cpu" | "cuda"
    std::uint64_t seed = 42;
    /// The problems carry their vendor-library rows (with_reference_rows): recorded in the
    /// model, so ranking offers ATen next to the kernel configs.
    bool vendor_rows = false;
    /// Each vendor row counts this many times in the training loss (it is repeated among its
    /// problem's training rows): a problem has one ATen row against ~18 kernel configs, and
    /// which of ATen and the best kernel is faster decides most lost first picks. 1: every
    /// row once (4 did not lift held-out top-1 on the H200 Inductor data:
    /// docs/experiments/2026-11-26-ranking-loss-and-features.md).
    int vendor_weight = 1;
    /// Weight of the within-problem term (ranking_loss) added to the MSE of ln time; 0 trains
    /// on the MSE alone. Above 0 the rows are batched problem by problem. 3 by default since
    /// BatchNorm trains affine: on the H200 Inductor data it lifts held-out top-1 by a point
    /// (10 by 1.4; the shipped model trains with 15, data/models/inductor_h200.md), on the
    /// native H200 data it changes it within the seeds' spread
    /// (docs/experiments/2026-11-26-ranking-loss-and-features.md).
    double ranking_weight = 3.0;
    /// The within-problem term that ranking_weight weighs. Pairwise by default: on the H200
    /// Inductor data it lifts held-out Spearman by 0.02-0.04 over offset at equal R²
    /// (docs/experiments/2026-11-26-ranking-loss-and-features.md).
    RankingLoss ranking_loss = RankingLoss::pairwise;
    /// Affine by default: batches with a ranking term hold three or four problems, whose
    /// hidden activations batch statistics would normalise against each other and not as
    /// inference does; on the H200 Inductor data affine lifts held-out top-1 from 0.936 to
    /// 0.948 (docs/experiments/2026-11-27-batchnorm-affine.md).
    BatchNormMode batch_norm = BatchNormMode::affine;
    /// Networks trained with seeds seed, seed + 1, ... on the same split and averaged in
    /// log space into one network (base models only).
    int ensemble = 1;
    /// Validate every N epochs (and after the last); early stopping sees only those.
    int eval_every = 1;
    /// CPU intra-op threads during training; 0: one per 512 rows of a batch, at most the
    /// hardware's (training_threads in src/model/flat_adam.hpp says why).
    int threads = 0;
    /// Networks trained at once on the CPU (ensemble members; in cross_validate, every
    /// fold's), each on its own thread with `threads` step threads; 0: as many as the cores
    /// hold. Every network's draws follow from its seed alone, so any count gives the same
    /// models. A GPU trains one network at a time.
    int jobs = 0;
    /// Capture a training step as a CUDA graph once and replay it for every full batch
    /// (3.5x faster for the deep model on an H200). Unset: wherever it can be (a CUDA
    /// build, device cuda); true: required
    /// (core::InputError where it cannot be); false: steps launched one by one.
    std::optional<bool> cuda_graph;
    /// The split to use instead of split_by_problem (cross-validation folds).
    std::optional<ProblemSplit> split;
    /// Called after every epoch (progress lines).
    std::function<void(const EpochStats&)> on_epoch;
    /// Polled between batches; returning true ends training early (Ctrl-C) with the best
    /// weights restored.
    std::function<bool()> stop_requested;
    /// Worst predictions kept in the test report.
    std::size_t top_n_worst = 10;
};

struct TrainResult {
    Predictor model;  ///< best weights, ready to predict and save
    std::vector<EpochStats> history;
    int best_epoch = 0;
    double best_validation_loss = 0.0;
    bool stopped_early = false;  ///< patience ran out
    bool interrupted = false;    ///< stop_requested returned true
    ProblemSplit split;
    std::size_t train_rows = 0;
    std::size_t validation_rows = 0;
    std::size_t test_rows = 0;
    EvaluationReport test_report;
};

/// "cuda" when LibTorch sees a CUDA device, else "cpu".
std::string default_training_device();

/// Throws core::InputError("--device", ...) when the device can't be used for training.
void check_training_device(const std::string& device);

/// Throws core::InputError naming the option when a hyperparameter is out of range.
void validate_train_options(const TrainOptions& options);

/// Trains on already grouped problems (every problem keeps its configs in one split).
/// Throws core::InputError on too few problems or bad options.
TrainResult train_model(const std::vector<ProblemGroup>& problems, const TrainOptions& options);

/// One fold's outcome in cross_validate.
struct FoldResult {
    std::size_t train_problems = 0;
    std::size_t test_problems = 0;
    int best_epoch = 0;
    double seconds = 0.0;  ///< wall time of the fold's training (with --jobs, waits for a free slot included)
    EvaluationReport report;  ///< on the fold's held-out problems
};

struct CrossValidationResult {
    std::vector<FoldResult> folds;
    /// Every problem predicted by the model that did not see it, evaluated together.
    EvaluationReport pooled;
    /// Those problems fold by fold, each with its fold's number (0-based) and the held-out
    /// prediction (ln ms) for each of its timings, in the problem's order.
    std::vector<ProblemGroup> held_out;
    std::vector<int> held_out_fold;
    std::vector<std::vector<double>> held_out_log_ms;
    bool interrupted = false;
};

/// K-fold cross-validation by problem (k_fold_splits with options.validation_fraction
/// and options.seed): trains one model per fold with `options` and evaluates it on the
/// fold. `on_fold` (optional) is called after each fold, one call at a time; with
/// several jobs (TrainOptions::jobs) folds train side by side and finish in any order.
CrossValidationResult cross_validate(const std::vector<ProblemGroup>& problems, const TrainOptions& options,
                                     int folds, const std::function<void(std::size_t, const FoldResult&)>& on_fold = {});

/// Groups the dataset (`source` names it in errors), then trains.
TrainResult train_model(const core::Dataset& dataset, const std::string& source,
                        const TrainOptions& options);

}  // namespace mmt::model
