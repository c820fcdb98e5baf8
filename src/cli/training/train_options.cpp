// Options shared by train and collect-and-train, and the training run they share.

#include "train_options.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "log.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/training_log.hpp"
#include "matmul_toolkit/model/tuner.hpp"

namespace mmt::cli {
namespace {

std::optional<std::string> optional_filter(const std::string& value) {
    if (value.empty()) return std::nullopt;
    return value;
}

std::string rate(double rows_per_second) {
    char buffer[32];
    if (rows_per_second >= 1e6) std::snprintf(buffer, sizeof(buffer), "%.2fM", rows_per_second / 1e6);
    else if (rows_per_second >= 1e3) std::snprintf(buffer, sizeof(buffer), "%.1fk", rows_per_second / 1e3);
    else std::snprintf(buffer, sizeof(buffer), "%.0f", rows_per_second);
    return buffer;
}

// A file can be created in the directory: the directory exists (or is created) and a
// probe file can be written and removed.
void check_writable_dir(const std::filesystem::path& dir, const std::string& option) {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) throw core::InputError(option, "cannot create directory '" + dir.string() + "': " + ec.message());
    const auto probe = (dir.empty() ? std::filesystem::path(".") : dir) / ".mmt_write_probe";
    {
        std::ofstream out(probe);
        if (!out) throw core::InputError(option, "cannot write to directory '" + dir.string() + "'");
    }
    std::filesystem::remove(probe, ec);
}

/// K-fold cross-validation by problem: one line per fold, then the pooled report.
void run_cross_validation(const std::vector<model::ProblemGroup>& problems, const model::TrainOptions& options,
                          int folds, const std::string& log_dir, const std::string& source) {
    try {
        model::k_fold_splits(problems.size(), folds, options.validation_fraction, options.seed);
    } catch (const core::InputError& e) {
        if (e.subject() == "dataset") throw core::InputError(source, e.detail());
        throw;
    }
    log_info(printf_string("%d-fold cross-validation by problem, seed %llu", folds,
                            static_cast<unsigned long long>(options.seed)));
    const auto result = model::cross_validate(
        problems, options, folds, [&](std::size_t f, const model::FoldResult& fold) {
            const auto& m = fold.report.overall;
            log_info(printf_string("fold %zu/%d: %zu test problems, best epoch %d, %.1f s: rmse_log %.4f  r2 %.3f  "
                                   "spearman %.3f  top1 %.3f  top5 %.3f  regret %.1f %% (p95 %.1f %%)",
                                   f + 1, folds, fold.test_problems, fold.best_epoch, fold.seconds, m.rmse_log,
                                   m.r2, m.spearman, m.top_k_achieved[0], m.top_k_achieved[1],
                                   100.0 * m.regret_mean, 100.0 * m.regret_p95));
        });
    if (result.interrupted) throw core::Interrupted("cross-validation interrupted; nothing saved");
    const auto path = model::write_cross_validation_log(result, log_dir);
    std::cout << folds << "-fold cross-validation by problem (seed " << options.seed << "; every problem predicted by "
              << "the model that did not see it; " << path.string() << "):\n"
              << model::format_report(result.pooled) << "\n";
}

}  // namespace

TrainCliOptions recipe_options(const std::string& name) {
    TrainCliOptions o;  // inductor_h200: the defaults
    if (name == "inductor_h200") return o;
    if (name == "quick") {
        // One small network, early stopping on a short patience: seconds on the sample files.
        o.hidden_dims = "64,32";
        o.dropout = 0.2;
        o.num_epochs = 100;
        o.patience = 10;
        o.weight_average = 0.0;
        o.ranking_weight = 3.0;
        o.ranking_loss = "pairwise";
        o.test_fraction = 0.15;
        o.ensemble = 1;
        return o;
    }
    throw core::InputError("--recipe", "'" + name + "' is not a recipe (inductor_h200, quick)");
}

namespace {

/// The recipe's value of every recipe option the command line did not give.
void apply_recipe(const CLI::App& cmd, TrainCliOptions& o) {
    const TrainCliOptions recipe = recipe_options(o.recipe);
    const auto unless_given = [&](const char* name, auto member) {
        if (cmd.count(name) == 0) o.*member = recipe.*member;
    };
    unless_given("--model-type", &TrainCliOptions::model_type);
    unless_given("--hidden-dims", &TrainCliOptions::hidden_dims);
    unless_given("--dropout", &TrainCliOptions::dropout);
    unless_given("--num-epochs", &TrainCliOptions::num_epochs);
    unless_given("--patience", &TrainCliOptions::patience);
    unless_given("--weight-average", &TrainCliOptions::weight_average);
    unless_given("--ranking-weight", &TrainCliOptions::ranking_weight);
    unless_given("--ranking-loss", &TrainCliOptions::ranking_loss);
    unless_given("--test-fraction", &TrainCliOptions::test_fraction);
    unless_given("--ensemble", &TrainCliOptions::ensemble);
    // An ensemble is of base networks: another model type trains one unless --ensemble says more.
    if (o.model_type != "base" && cmd.count("--ensemble") == 0) o.ensemble = 1;
}

}  // namespace

void add_training_options(CLI::App& cmd, TrainCliOptions& o, bool with_model_path) {
    if (with_model_path) {
        cmd.add_option("--output", o.model, "Where to save the trained model (.pt)")->capture_default_str();
        add_old_spelling(cmd, "--model", "--output", o.model);
    }
    cmd.add_option("--recipe", o.recipe,
                   "Training recipe: inductor_h200 (the shipped model's, the defaults below: three base 96,48 "
                   "networks averaged, weight averaging, the top-weighted ranking term at 15, no test split) or "
                   "quick (one base 64,32 network, dropout 0.2, 100 epochs, patience 10, pairwise ranking at 3, "
                   "15 % test problems). Options given on the command line override the recipe's values")
        ->check(CLI::IsMember({"inductor_h200", "quick"}))
        ->capture_default_str();
    cmd.parse_complete_callback([&cmd, &o] { apply_recipe(cmd, o); });
    cmd.add_option("--model-type", o.model_type,
                   "base: Linear-ReLU-BatchNorm-Dropout blocks (the default); deep: torch-diode's residual "
                   "blocks")
        ->check(CLI::IsMember({"base", "deep"}))
        ->capture_default_str();
    cmd.add_option("--hidden-dims", o.hidden_dims,
                   "Hidden sizes of the base model, comma-separated (torch-diode's: 256,512,256,128,64)")
        ->capture_default_str();
    cmd.add_option("--hidden-dim", o.hidden_dim, "Width of the deep model's residual blocks")->capture_default_str();
    cmd.add_option("--num-layers", o.num_layers, "Residual blocks of the deep model")->capture_default_str();
    cmd.add_option("--dropout", o.dropout, "Dropout rate")->capture_default_str();
    cmd.add_option("--batch-size", o.batch_size, "Rows per training step")->capture_default_str();
    cmd.add_option("--num-epochs", o.num_epochs, "Most epochs to train")->capture_default_str();
    cmd.add_option("--learning-rate", o.learning_rate, "Adam learning rate")->capture_default_str();
    cmd.add_option("--weight-decay", o.weight_decay, "Adam weight decay")->capture_default_str();
    cmd.add_option("--patience", o.patience,
                   "Stop after this many epochs without a better validation loss; the best "
                   "epoch's weights are kept")
        ->capture_default_str();
    cmd.add_option("--lr-decay-after", o.lr_decay_after,
                   "Multiply the learning rate by --lr-decay after this many epochs without a better "
                   "validation loss, and after each such run again (0: a constant rate)")
        ->capture_default_str();
    cmd.add_option("--lr-decay", o.lr_decay, "Factor of each learning-rate decay (--lr-decay-after)")
        ->capture_default_str();
    cmd.add_option("--weight-average", o.weight_average,
                   "Keep an exponential moving average of the weights, this decay a step (e.g. 0.999: "
                   "about the last 1,000 steps), and validate, keep and save it instead of the weights "
                   "(0: the weights themselves)")
        ->capture_default_str();
    cmd.add_option("--validation-fraction", o.validation_fraction, "Share of problems for validation")
        ->capture_default_str();
    cmd.add_option("--test-fraction", o.test_fraction,
                   "Share of problems for the final test; 0: train on them too (--folds then gives the "
                   "held-out estimate)")
        ->capture_default_str();
    cmd.add_option("--hardware-name", o.hardware_name, "Train only on this hardware's timings");
    cmd.add_option("--op-name", o.op_name, "Train only on this operation (mm also selects mm_nt, ...)");
    cmd.add_option("--log-dir", o.log_dir,
                   "Directory for training_history.csv, training_loss.svg and test_metrics.json")
        ->capture_default_str();
    cmd.add_option("--top-n-worst", o.top_n_worst, "Worst test predictions to list")->capture_default_str();
    cmd.add_option("--ranking-weight", o.ranking_weight,
                   "Weight of a within-problem term (--ranking-loss) added to the MSE of ln time, rows "
                   "batched problem by problem; 0: the MSE alone")
        ->capture_default_str();
    cmd.add_option("--ranking-loss", o.ranking_loss,
                   "The within-problem term --ranking-weight weighs: offset (each prediction's offset from "
                   "its problem's mean against the measured one, squared) or pairwise (a logistic loss on "
                   "the predicted order of each two configs of a problem more than 5 % apart) or top (pairwise, each pair "
                   "weighted up to 5x by how close its faster config is to the problem's fastest)")
        ->capture_default_str();
    cmd.add_option("--batch-norm", o.batch_norm,
                   "What BatchNorm does in training: affine (a learnt scale and shift per unit, as at "
                   "inference) or batch (each batch's mean and variance, as torch-diode trains; with a ranking "
                   "term a batch holds only three or four problems)")
        ->capture_default_str();
    cmd.add_option("--ensemble", o.ensemble,
                   "Train this many networks (seeds seed, seed+1, ...) on the same split and save their "
                   "mean in log space as one base network (hidden widths times N)")
        ->capture_default_str();
    cmd.add_option("--eval-every", o.eval_every,
                   "Validate every N epochs (and after the last); the epochs between count toward --patience")
        ->capture_default_str();
    cmd.add_option("--threads", o.threads,
                   "CPU threads for training steps; 0: one per 512 rows of a batch (batch 64: one; more threads "
                   "only slow steps this small down, by 10x and more on a busy machine)")
        ->capture_default_str();
    cmd.add_option("--jobs", o.jobs,
                   "Networks trained at once on the CPU (--ensemble members; with --folds, every fold's), "
                   "each on a thread of its own with --threads step threads; 0: as many as the cores hold. "
                   "The models do not depend on it")
        ->capture_default_str();
    // Graph steps are the default wherever they can run; the flags require or refuse them.
    auto* graph = cmd.add_flag("--cuda-graph", o.cuda_graph,
                               "Require CUDA-graph steps (an error where they cannot run). Without either flag a "
                               "GPU run captures one training step as a CUDA graph and replays it for every full "
                               "batch instead of launching each step's ~300 kernels from the host");
    cmd.add_flag("--no-cuda-graph", o.no_cuda_graph, "Launch every training step's kernels one by one from the host")
        ->excludes(graph);
    cmd.add_option("--folds", o.folds,
                   "First estimate held-out quality by K-fold cross-validation by problem (per-fold and "
                   "pooled metrics, cv_metrics.json and the held-out predictions, cv_predictions.csv, in "
                   "--log-dir), then train and save the model as usual; 0: no cross-validation")
        ->capture_default_str();
    cmd.add_option("--tune", o.tune,
                   "Search N trials (seeded by --seed) over the base network's widths and depth, learning rate, "
                   "weight decay and dropout; each is scored on the validation problems (top-1, then RMSE), "
                   "printed as a table, and the best is saved; trial 0 is the options as given; 0: off")
        ->capture_default_str();
    add_old_flag_spelling(cmd, "--no-vendor-rows", o.no_vendor_rows);
    add_old_spelling(cmd, "--vendor-weight", "--aten-weight", o.vendor_weight);
    // collect-and-train's --no-aten (collect's: no ATen entry timed) means this one too.
    if (cmd.get_option_no_throw("--no-aten") == nullptr) {
        cmd.add_flag("--no-aten", o.no_vendor_rows,
                     "Leave each problem's fastest vendor-library entry (aten_*) out of training: the model "
                     "then ranks kernel configs only (by default it learns ATen's time too, and recommend / "
                     "export-lut pick ATen where it predicts ATen fastest, as max-autotune does)");
    }
    cmd.add_option("--aten-weight", o.vendor_weight,
                   "Count each problem's vendor row (aten_*) this many times in the training loss, against "
                   "its ~18 kernel configs once each: whether ATen or the best kernel is faster decides many "
                   "first picks")
        ->capture_default_str();
}

std::string training_device(const GlobalOptions& global) {
    if (!global.device.empty()) return global.device;
    return model::default_training_device();
}

model::TrainOptions to_train_options(const TrainCliOptions& o, const GlobalOptions& global) {
    model::TrainOptions t;
    t.model.type = model::parse_model_type(o.model_type);
    if (t.model.type == model::ModelType::base) t.model.hidden_dims = model::parse_hidden_dims(o.hidden_dims);
    t.model.hidden_dim = o.hidden_dim;
    t.model.num_layers = o.num_layers;
    t.model.dropout_rate = o.dropout;
    t.learning_rate = o.learning_rate;
    t.weight_decay = o.weight_decay;
    t.batch_size = o.batch_size;
    t.num_epochs = o.num_epochs;
    t.patience = o.patience;
    t.lr_decay_after = o.lr_decay_after;
    t.lr_decay = o.lr_decay;
    t.weight_average = o.weight_average;
    t.validation_fraction = o.validation_fraction;
    t.test_fraction = o.test_fraction;
    t.device = training_device(global);
    t.seed = global.seed;
    t.vendor_rows = !o.no_vendor_rows;
    t.vendor_weight = o.vendor_weight;
    t.ranking_weight = o.ranking_weight;
    t.ranking_loss = model::parse_ranking_loss(o.ranking_loss);
    t.batch_norm = model::parse_batch_norm_mode(o.batch_norm);
    t.ensemble = o.ensemble;
    t.eval_every = o.eval_every;
    t.threads = o.threads;
    t.jobs = o.jobs;
    if (o.cuda_graph) t.cuda_graph = true;
    if (o.no_cuda_graph) t.cuda_graph = false;
    if (o.folds == 1 || o.folds < 0) throw core::InputError("--folds", "must be 0 (off) or at least 2");
    if (o.tune < 0) throw core::InputError("--tune", "must be 0 (off) or a number of trials");
    if (o.tune > 0 && t.model.type != model::ModelType::base) {
        throw core::InputError("--tune", "searches base networks (use --model-type base)");
    }
    if (o.top_n_worst < 0) throw core::InputError("--top-n-worst", "must not be negative");
    t.top_n_worst = static_cast<std::size_t>(o.top_n_worst);
    return t;
}

void check_training_outputs(const TrainCliOptions& o) {
    const std::filesystem::path model_path(o.model);
    if (std::filesystem::is_directory(model_path)) {
        throw core::InputError("--output", "'" + o.model + "' is a directory; give a file name such as model.pt");
    }
    check_writable_dir(model_path.parent_path(), "--output");
    check_writable_dir(o.log_dir, "--log-dir");
}

int run_training(const TrainCliOptions& o, const core::Dataset& dataset, const std::string& source,
                 const GlobalOptions& global) {
    auto options = to_train_options(o, global);
    model::validate_train_options(options);
    model::check_training_device(options.device);
    check_training_outputs(o);
    auto problems = model::select_dataset_problems(dataset, source, optional_filter(o.hardware_name),
                                                   optional_filter(o.op_name));
    if (options.vendor_rows) problems = model::with_reference_rows(std::move(problems));
    try {
        model::split_by_problem(problems.size(), options.validation_fraction, options.test_fraction, options.seed);
    } catch (const core::InputError& e) {
        if (e.subject() == "dataset") throw core::InputError(source, e.detail());
        throw;
    }

    log_info(printf_string("training %s on %zu rows of %zu problems from %s (%s)", options.model.describe().c_str(),
                           static_cast<std::size_t>(model::count_rows(problems)), problems.size(), source.c_str(),
                           options.device.c_str()));
    options.on_epoch = [&](const model::EpochStats& e) {
        const std::string member =
            options.ensemble > 1 ? printf_string("member %d/%d  ", e.member + 1, static_cast<int>(options.ensemble)) : "";
        log_info(printf_string("%sepoch %3d/%d  train %.5f  val %.5f%s  %s rows/s  %.3f s", member.c_str(), e.epoch,
                               static_cast<int>(options.num_epochs), e.train_loss, e.validation_loss,
                               e.improved ? " *" : "  ", rate(e.rows_per_second).c_str(), e.seconds));
    };
    collect::clear_interrupt();
    collect::InterruptHandlerScope interrupt_scope;
    options.stop_requested = [] { return collect::interrupt_requested(); };
    if (o.folds > 0) run_cross_validation(problems, options, o.folds, o.log_dir, source);

    model::TrainResult result;
    if (o.tune > 0) {
        options.on_epoch = nullptr;  // a line per trial instead
        log_info(printf_string("tuning: %d trials on the validation problems", o.tune));
        auto tuned = model::tune_model(problems, options, o.tune, [&](std::size_t t, const model::TuneTrial& trial) {
            log_info(printf_string("trial %zu/%d: %s lr %.3g wd %.3g: validation rmse_log %.4f top1 %.3f (%.1f s)",
                                   t + 1, o.tune, trial.model.describe().c_str(), trial.learning_rate,
                                   trial.weight_decay, trial.validation.rmse_log, trial.validation.top_k_achieved[0],
                                   trial.seconds));
        });
        std::cout << model::format_tune_table(tuned) << "\n";
        options.model = tuned.trials[tuned.best].model;
        result = std::move(tuned.best_result);
    } else {
        result = model::train_model(problems, options);
    }

    if (result.interrupted && result.best_epoch == 0) {
        throw core::Interrupted("training interrupted before the first epoch finished; nothing saved");
    }
    result.model.save(o.model);
    const auto logs = model::write_training_logs(result, o.log_dir);

    double seconds = 0.0, rows_per_second = 0.0;
    for (const auto& e : result.history) seconds += e.seconds, rows_per_second += e.rows_per_second;
    if (!result.history.empty()) rows_per_second /= static_cast<double>(result.history.size());

    if (result.interrupted) {
        throw core::Interrupted("training interrupted after epoch " + std::to_string(result.history.size()) +
                                "; the best model so far (epoch " + std::to_string(result.best_epoch) +
                                ") was saved to " + o.model);
    }
    std::cout << "trained " << options.model.describe()
              << (options.ensemble > 1 ? " x" + std::to_string(options.ensemble) + " (ensemble, saved as one network)" : "")
              << " on " << result.train_rows << " rows of "
              << result.split.train.size() << " problems (validation " << result.split.validation.size()
              << ", test " << result.split.test.size() << " problems) for " << result.history.size()
              << " epochs" << (result.stopped_early ? " (early stop)" : "") << ", best epoch " << result.best_epoch
              << ", " << std::fixed << std::setprecision(1) << seconds << " s, " << rate(rows_per_second) << " rows/s on " << options.device << "\n";
    std::cout << "model saved to " << o.model << "\n";
    std::cout << "logs: " << logs[0].string() << ", " << logs[1].string() << ", " << logs[2].string() << "\n";
    if (result.split.test.empty()) {
        std::cout << "\nno test split (--test-fraction 0)"
                  << (o.folds > 0 ? ": the cross-validation above measured held-out quality\n" : "\n");
    } else {
        std::cout << "\ntest split (" << result.split.test.size() << " problems never seen in training):\n"
                  << model::format_report(result.test_report);
    }
    return core::kExitOk;
}

}  // namespace mmt::cli
