#include "matmul_toolkit/model/trainer.hpp"

#include <chrono>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>

#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "flat_adam.hpp"
#include "predictor_impl.hpp"
#include "training_step.hpp"
#ifdef MMT_TRAINING_CUDA_GRAPHS
#include "training_step_graph.hpp"
#endif

namespace mmt::model {

RankingLoss parse_ranking_loss(const std::string& name) {
    if (name == "offset") return RankingLoss::offset;
    if (name == "pairwise") return RankingLoss::pairwise;
    if (name == "top") return RankingLoss::top;
    throw core::InputError("--ranking-loss", "unknown loss '" + name + "' (expected offset, pairwise or top)");
}

BatchNormMode parse_batch_norm_mode(const std::string& name) {
    if (name == "batch") return BatchNormMode::batch;
    if (name == "affine") return BatchNormMode::affine;
    throw core::InputError("--batch-norm", "unknown mode '" + name + "' (expected batch or affine)");
}

namespace {

using Clock = std::chrono::steady_clock;

/// at::set_num_threads for a scope; the previous count comes back after it.
class ThreadCountScope {
public:
    explicit ThreadCountScope(int threads) : m_previous(at::get_num_threads()) { at::set_num_threads(threads); }
    ~ThreadCountScope() { at::set_num_threads(m_previous); }
    ThreadCountScope(const ThreadCountScope&) = delete;
    ThreadCountScope& operator=(const ThreadCountScope&) = delete;

private:
    int m_previous;
};

/// Rows of raw features and ln(time) for a set of problems, each row with its own
/// hardware's parallel units.
struct FeatureRows {
    std::size_t rows = 0;
    std::vector<float> x;
    std::vector<float> y;
    std::vector<std::int64_t> first_row;  ///< per problem, its first row; then `rows`
};

class HardwareCache {
public:
    int units(const std::string& name) {
        auto it = m_units.find(name);
        if (it == m_units.end()) it = m_units.emplace(name, lookup_hardware(name).parallel_units).first;
        return it->second;
    }

private:
    std::map<std::string, int> m_units;
};

/// The rows of the problems `which`, problem by problem; each vendor row `vendor_copies`
/// times (TrainOptions::vendor_weight).
FeatureRows build_rows(const std::vector<ProblemGroup>& problems, const std::vector<std::size_t>& which,
                       HardwareCache& hardware, int vendor_copies = 1) {
    FeatureRows out;
    const std::size_t width = num_features();
    const auto copies = [&](const core::GemmConfig& config) {
        return is_reference_config(config) ? static_cast<std::size_t>(vendor_copies) : std::size_t{1};
    };
    for (auto i : which) {
        for (const auto& timed : problems[i].timings) out.rows += copies(timed.config);
    }
    out.x.resize(out.rows * width);
    out.y.resize(out.rows);
    std::size_t row = 0;
    for (auto i : which) {
        const auto& p = problems[i];
        out.first_row.push_back(static_cast<std::int64_t>(row));
        const ProblemFeatures features(p.op_key, p.shape, hardware.units(p.hardware));
        for (const auto& timed : p.timings) {
            for (std::size_t copy = copies(timed.config); copy > 0; --copy) {
                features.write(timed.config, out.x.data() + row * width);
                out.y[row] = static_cast<float>(std::log(timed.time_ms));
                ++row;
            }
        }
    }
    out.first_row.push_back(static_cast<std::int64_t>(row));
    return out;
}

void standardisation_stats(const FeatureRows& train, std::vector<float>& mean, std::vector<float>& std_dev) {
    const std::size_t width = num_features();
    std::vector<double> sum(width, 0.0), sum_sq(width, 0.0);
    for (std::size_t r = 0; r < train.rows; ++r) {
        const float* row = train.x.data() + r * width;
        for (std::size_t j = 0; j < width; ++j) sum[j] += row[j];
    }
    mean.assign(width, 0.0f);
    for (std::size_t j = 0; j < width; ++j) mean[j] = static_cast<float>(sum[j] / train.rows);
    for (std::size_t r = 0; r < train.rows; ++r) {
        const float* row = train.x.data() + r * width;
        for (std::size_t j = 0; j < width; ++j) {
            const double d = row[j] - mean[j];
            sum_sq[j] += d * d;
        }
    }
    std_dev.assign(width, 1.0f);
    for (std::size_t j = 0; j < width; ++j) {
        const double s = std::sqrt(sum_sq[j] / train.rows);
        // A feature constant in the training data (e.g. num_warps on CPU) is left
        // centred but unscaled rather than divided by zero.
        std_dev[j] = s > 1e-6 ? static_cast<float>(s) : 1.0f;
    }
}

}  // namespace

void validate_train_options(const TrainOptions& o) {
    o.model.validate();
    if (!(o.learning_rate > 0.0)) throw core::InputError("--learning-rate", "must be positive");
    if (o.weight_decay < 0.0) throw core::InputError("--weight-decay", "must not be negative");
    // BatchNorm needs two rows per batch to estimate a variance in training mode.
    if (o.batch_size < 2) throw core::InputError("--batch-size", "must be at least 2");
    if (o.num_epochs < 1) throw core::InputError("--num-epochs", "must be at least 1");
    if (o.patience < 1) throw core::InputError("--patience", "must be at least 1");
    if (o.lr_decay_after < 0) throw core::InputError("--lr-decay-after", "must be 0 (no decay) or more");
    if (!(o.lr_decay > 0.0 && o.lr_decay <= 1.0)) throw core::InputError("--lr-decay", "must be in (0, 1]");
    if (!(o.weight_average >= 0.0 && o.weight_average < 1.0))
        throw core::InputError("--weight-average", "must be in [0, 1) (0: off)");
    if (!(o.ranking_weight >= 0.0)) throw core::InputError("--ranking-weight", "must not be negative");
    if (o.vendor_weight < 1) throw core::InputError("--aten-weight", "must be at least 1");
    if (o.vendor_weight > 1 && !o.vendor_rows) {
        throw core::InputError("--aten-weight", "weighs the ATen rows, which --no-aten leaves out");
    }
    if (o.ensemble < 1) throw core::InputError("--ensemble", "must be at least 1");
    if (o.eval_every < 1) throw core::InputError("--eval-every", "must be at least 1");
    if (o.threads < 0) throw core::InputError("--threads", "must be 0 (automatic) or more");
    if (o.jobs < 0) throw core::InputError("--jobs", "must be 0 (one per core) or more");
    if (o.jobs > 1 && o.device != "cpu") {
        throw core::InputError("--jobs", "trains several networks at once on the CPU only (--device cpu)");
    }
    if (o.cuda_graph.value_or(false)) {
#ifndef MMT_TRAINING_CUDA_GRAPHS
        throw core::InputError("--cuda-graph", "this build's LibTorch has no CUDA (graphs need one)");
#endif
        if (o.device != "cuda") throw core::InputError("--cuda-graph", "replays steps on a GPU: use --device cuda");
    }
    if (o.ensemble > 1 && o.model.type != ModelType::base) {
        throw core::InputError("--ensemble", "averages base networks only (use --model-type base)");
    }
}

namespace {

std::string hardware_names(const std::vector<ProblemGroup>& problems) {
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (const auto& p : problems) {
        if (seen.insert(p.hardware).second) names.push_back(p.hardware);
    }
    std::string joined;
    for (std::size_t i = 0; i < names.size(); ++i) joined += (i ? ", " : "") + names[i];
    return joined;
}

at::Tensor to_tensor(std::vector<float>& values, std::int64_t rows, std::int64_t cols,
                     const c10::Device& device) {
    auto t = torch::from_blob(values.data(), {rows, cols}, torch::kFloat32);
    return t.to(device, /*non_blocking=*/false, /*copy=*/true);
}

/// Mean squared error over a whole matrix, predicted in large chunks without autograd.
double evaluate_loss(RuntimeNet& net, const at::Tensor& x, const at::Tensor& y) {
    torch::NoGradGuard no_grad;
    const std::int64_t rows = x.size(0);
    if (rows == 0) return 0.0;
    constexpr std::int64_t kChunk = 1 << 16;
    at::Tensor total = torch::zeros({}, x.options());
    for (std::int64_t start = 0; start < rows; start += kChunk) {
        const std::int64_t end = std::min(rows, start + kChunk);
        auto diff = net->forward(x.slice(0, start, end)) - y.slice(0, start, end);
        total += diff.pow(2).sum();
    }
    return total.item<double>() / static_cast<double>(rows);
}

using StateCopy = std::vector<at::Tensor>;

StateCopy copy_state(RuntimeNet& net) {
    torch::NoGradGuard no_grad;
    StateCopy copy;
    for (auto& [name, tensor] : net->state_dict()) copy.push_back(tensor.detach().clone());
    return copy;
}

void restore_state(RuntimeNet& net, const StateCopy& copy) {
    torch::NoGradGuard no_grad;
    auto state = net->state_dict();
    for (std::size_t i = 0; i < state.size(); ++i) state[i].second.copy_(copy[i]);
}

/// The training split's rows and both splits' tensors, standardised, on the device.
struct TrainingData {
    FeatureRows train;
    double target_mean = 0.0;
    at::Tensor x_train, y_train, x_val, y_val;
};

/// One network trained with early stopping; its best epoch's weights restored.
struct Fit {
    RuntimeNet net;
    std::vector<EpochStats> history;
    int best_epoch = 0;
    double best_loss = std::numeric_limits<double>::infinity();
    bool stopped_early = false;
    bool interrupted = false;
};

/// Guards LibTorch's global CPU generator while networks are built (their layers draw
/// default weights) and seeded.
std::mutex global_generator_mutex;

/// A network whose initial weights follow from `seed` alone, and in `rest` a generator that
/// goes on where those draws ended: the stream a lone training would continue with on the
/// global generator, private to this network whatever trains beside it.
RuntimeNet seeded_network(const ModelSpec& spec, double output_bias, std::uint64_t seed, at::Generator& rest) {
    const std::lock_guard<std::mutex> lock(global_generator_mutex);
    torch::manual_seed(seed);
    RuntimeNet net(spec, static_cast<int>(num_features()));
    net->initialise(output_bias);
    at::Generator global = at::detail::getDefaultCPUGenerator();
    const std::lock_guard<std::mutex> global_lock(global.mutex());
    rest = global.clone();
    return net;
}

Fit fit_network(const TrainingData& data, const TrainOptions& options, std::uint64_t seed, int member,
                const c10::Device& device) {
    // Batch order and (on the CPU) dropout masks come from this network's own generator.
    at::Generator generator;
    Fit fit{seeded_network(options.model, data.target_mean, seed, generator)};
    RuntimeNet& net = fit.net;
    if (device.is_cpu()) net->set_dropout_generator(generator);
    net->to(device);
    const bool batch_statistics = options.batch_norm == BatchNormMode::batch;
    net->train_mode(batch_statistics);  // before a CUDA graph captures the step
    const FeatureRows& train = data.train;
    const at::Tensor &x_train = data.x_train, &y_train = data.y_train, &x_val = data.x_val, &y_val = data.y_val;

    FlatAdam optimizer(net->parameters(), options.learning_rate, options.weight_decay);
    if (options.weight_average > 0.0) optimizer.keep_weight_average(options.weight_average);

    const auto n = static_cast<std::int64_t>(train.rows);
    const std::int64_t batch = options.batch_size;
    const bool ranking = options.ranking_weight > 0.0;
    const RankingTerm ranking_term{options.ranking_weight, options.ranking_loss};
    StateCopy best_state = copy_state(net);
    double best_loss = std::numeric_limits<double>::infinity();
    int epochs_without_improvement = 0;
    double last_val_loss = 0.0;
#ifdef MMT_TRAINING_CUDA_GRAPHS
    std::unique_ptr<TrainingStepGraph> graphed;
    if (device.is_cuda() && options.cuda_graph.value_or(true) && n >= batch)
        graphed = std::make_unique<TrainingStepGraph>(net, optimizer, x_train, y_train, batch, ranking_term);
#endif

    for (int epoch = 1; epoch <= options.num_epochs; ++epoch) {
        const auto epoch_start = Clock::now();
        net->train_mode(batch_statistics);
        // The permutation is drawn on the CPU generator (seeded above) on every device,
        // so a seed gives the same batches on CPU and GPU.
        // With a ranking term the rows come problem by problem (shuffled problems, then
        // their rows), so a batch holds a few problems' configs side by side; batches are
        // still cut every `batch` rows (the captured step needs one shape), so a problem at
        // a cut is ranked in two parts. `row_group` numbers each row's problem within its batch.
        at::Tensor order, row_group;
        if (ranking) {
            const std::int64_t problems_in_split = static_cast<std::int64_t>(train.first_row.size()) - 1;
            const at::Tensor problem_order = torch::randperm(problems_in_split, generator, torch::kLong);
            const auto* po = problem_order.data_ptr<std::int64_t>();
            std::vector<std::int64_t> rows_in_order, groups_in_order;
            rows_in_order.reserve(train.rows);
            groups_in_order.reserve(train.rows);
            std::int64_t group_in_batch = -1;
            for (std::int64_t i = 0; i < problems_in_split; ++i) {
                ++group_in_batch;
                for (std::int64_t r = train.first_row[po[i]]; r < train.first_row[po[i] + 1]; ++r) {
                    if (static_cast<std::int64_t>(rows_in_order.size()) % batch == 0) group_in_batch = 0;
                    rows_in_order.push_back(r);
                    groups_in_order.push_back(group_in_batch);
                }
            }
            order = torch::tensor(rows_in_order, torch::kLong).to(device);
            row_group = torch::tensor(groups_in_order, torch::kLong).to(device);
        } else {
            order = torch::randperm(n, generator, torch::kLong).to(device);
        }
        std::vector<std::int64_t> batch_ends;
        for (std::int64_t end = batch; end < n + batch; end += batch) batch_ends.push_back(std::min(end, n));
        at::Tensor loss_sum = torch::zeros({}, x_train.options());
#ifdef MMT_TRAINING_CUDA_GRAPHS
        if (graphed) graphed->reset_loss_sum();
#endif
        std::int64_t rows_used = 0;
        bool stop = false;
        std::int64_t start = 0;
        for (std::size_t b = 0; b < batch_ends.size(); ++b) {
            const std::int64_t end = batch_ends[b];
            const std::int64_t batch_start = start;
            start = end;
            if (end - batch_start < 2) break;  // a one-row batch has no BatchNorm variance
            if (options.stop_requested && options.stop_requested()) {
                stop = true;
                break;
            }
            const at::Tensor index = order.slice(0, batch_start, end);
            const at::Tensor group = ranking ? row_group.slice(0, batch_start, end) : at::Tensor();
#ifdef MMT_TRAINING_CUDA_GRAPHS
            if (graphed && end - batch_start == batch) {
                graphed->step(index, group);
                rows_used += batch;
                continue;
            }
#endif
            const at::Tensor loss = training_step(net, optimizer, x_train, y_train, index, group, ranking_term);
            loss_sum += loss * static_cast<double>(end - batch_start);
            rows_used += end - batch_start;
        }
        if (stop) {
            fit.interrupted = true;
            break;
        }
#ifdef MMT_TRAINING_CUDA_GRAPHS
        if (graphed) loss_sum += graphed->loss_sum();
#endif
        const double train_loss = loss_sum.item<double>() / static_cast<double>(std::max<std::int64_t>(rows_used, 1));
        const double train_seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();

        // Validation every eval_every epochs (and at the last): in between the last
        // validation loss stands and the epoch counts as one without improvement.
        const bool validate = epoch % options.eval_every == 0 || epoch == options.num_epochs;
        net->eval();
        // With a weight average, the average is what is validated and kept: it stays in the
        // network from here to the end of the epoch's bookkeeping.
        if (optimizer.has_weight_average()) optimizer.swap_weight_average();
        const double val_loss = validate ? evaluate_loss(net, x_val, y_val) : last_val_loss;
        last_val_loss = val_loss;
        if (!std::isfinite(train_loss) || !std::isfinite(val_loss)) {
            throw core::Error("training", "loss became " + std::to_string(train_loss) + " / " +
                                              std::to_string(val_loss) + " at epoch " + std::to_string(epoch) +
                                              "; try a lower --learning-rate");
        }

        EpochStats stats;
        stats.epoch = epoch;
        stats.member = member;
        stats.learning_rate = optimizer.learning_rate();
        stats.train_loss = train_loss;
        stats.validation_loss = val_loss;
        stats.seconds = std::chrono::duration<double>(Clock::now() - epoch_start).count();
        stats.rows_per_second = static_cast<double>(rows_used) / std::max(train_seconds, 1e-9);
        stats.improved = validate && val_loss < best_loss;
        if (stats.improved) {
            best_loss = val_loss;
            fit.best_epoch = epoch;
            best_state = copy_state(net);
            epochs_without_improvement = 0;
        } else {
            ++epochs_without_improvement;
            if (options.lr_decay_after > 0 && epochs_without_improvement % options.lr_decay_after == 0)
                optimizer.set_learning_rate(optimizer.learning_rate() * options.lr_decay);
        }
        if (optimizer.has_weight_average()) optimizer.swap_weight_average();
        fit.history.push_back(stats);
        if (options.on_epoch) options.on_epoch(stats);
        if (epochs_without_improvement >= options.patience) {
            fit.stopped_early = epoch < options.num_epochs;
            break;
        }
    }

    restore_state(net, best_state);
    net->eval();
    fit.best_loss = best_loss;
    return fit;
}

/// Networks trained side by side on the CPU, across every fold and ensemble member: at
/// most `limit` at once; the first failure sets `abandon`, which stops the others.
class FitPool {
public:
    explicit FitPool(int limit) : m_free(limit) {}

    /// One network's turn: waits for a free slot, gives it back when it ends.
    class Slot {
    public:
        explicit Slot(FitPool& pool) : m_pool(pool) {
            std::unique_lock<std::mutex> lock(m_pool.m_mutex);
            m_pool.m_released.wait(lock, [this] { return m_pool.m_free > 0; });
            --m_pool.m_free;
        }
        ~Slot() {
            {
                const std::lock_guard<std::mutex> lock(m_pool.m_mutex);
                ++m_pool.m_free;
            }
            m_pool.m_released.notify_one();
        }
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        FitPool& m_pool;
    };

    /// Options whose stop_requested also answers true once a fit has failed and whose
    /// on_epoch calls come one at a time: what every fit in the pool runs with.
    TrainOptions shared(const TrainOptions& options) {
        TrainOptions shared = options;
        shared.stop_requested = [this, stop = options.stop_requested] { return abandon.load() || (stop && stop()); };
        if (options.on_epoch) {
            shared.on_epoch = [this, on_epoch = options.on_epoch](const EpochStats& stats) {
                const std::lock_guard<std::mutex> lock(callbacks);
                on_epoch(stats);
            };
        }
        return shared;
    }

    std::atomic<bool> abandon{false};
    /// Serialises the callers' callbacks (on_epoch, cross_validate's on_fold).
    std::mutex callbacks;

private:
    std::mutex m_mutex;
    std::condition_variable m_released;
    int m_free;
};

/// Runs task(0) ... task(count - 1), each on its own thread, and rethrows the first
/// exception after all have ended. `on_failure` runs once, when the first task throws.
void run_on_threads(std::size_t count, const std::function<void(std::size_t)>& task,
                    const std::function<void()>& on_failure) {
    std::mutex failure_mutex;
    std::exception_ptr failure;
    const auto fail = [&](std::exception_ptr error) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) {
            failure = std::move(error);
            on_failure();
        }
    };
    std::vector<std::thread> threads;
    threads.reserve(count);
    try {
        for (std::size_t i = 0; i < count; ++i) {
            threads.emplace_back([&, i] {
                try {
                    task(i);
                } catch (...) {
                    fail(std::current_exception());
                }
            });
        }
    } catch (...) {
        // No thread for the rest (std::system_error): stop the started ones, never leave them joinable.
        fail(std::current_exception());
    }
    for (auto& thread : threads) thread.join();
    if (failure) std::rethrow_exception(failure);
}

/// CPU threads of one network's training steps.
int threads_per_fit(const TrainOptions& options) {
    return options.threads > 0 ? options.threads : training_threads(options.batch_size);
}

/// Networks trained at once: on a GPU one; on the CPU --jobs, or as many as the cores hold
/// at threads_per_fit each.
int concurrent_fits(const TrainOptions& options, const c10::Device& device) {
    if (!device.is_cpu()) return 1;
    if (options.jobs > 0) return options.jobs;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::max(1, cores / threads_per_fit(options));
}

c10::Device training_device(const TrainOptions& options) {
    return options.device == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

/// The threads every training step of the scope uses (set once: LibTorch's count is
/// global, and fits on other threads read it).
ThreadCountScope step_threads(const TrainOptions& options, const c10::Device& device) {
    return ThreadCountScope(device.is_cpu() ? threads_per_fit(options) : at::get_num_threads());
}

TrainResult train_in_pool(const std::vector<ProblemGroup>& problems, const TrainOptions& options, FitPool* pool);

}  // namespace

std::string default_training_device() { return torch::cuda::is_available() ? "cuda" : "cpu"; }

void check_training_device(const std::string& device) {
    if (device == "cpu") return;
    if (device != "cuda") throw core::InputError("--device", "unknown device '" + device + "' (expected cpu or cuda)");
    if (!torch::cuda::is_available()) {
        throw core::InputError("--device", "cuda requested but LibTorch sees no CUDA device "
                                           "(this LibTorch build or machine has no usable GPU)");
    }
}

TrainResult train_model(const core::Dataset& dataset, const std::string& source, const TrainOptions& options) {
    return train_model(group_problems(dataset, source), options);
}

TrainResult train_model(const std::vector<ProblemGroup>& problems, const TrainOptions& options) {
    validate_train_options(options);
    check_training_device(options.device);
    const c10::Device device = training_device(options);
    const ThreadCountScope threads = step_threads(options, device);
    const int jobs = std::min(concurrent_fits(options, device), options.ensemble);
    if (jobs <= 1) return train_in_pool(problems, options, nullptr);
    FitPool pool(jobs);
    return train_in_pool(problems, pool.shared(options), &pool);
}

namespace {

/// train_model's work; with `pool`, its ensemble members train on threads of their own,
/// as many at once as the pool allows (shared with other folds'), else one after another.
/// `options` are then the pool's shared() options.
TrainResult train_in_pool(const std::vector<ProblemGroup>& problems, const TrainOptions& options, FitPool* pool) {
    const c10::Device device = training_device(options);

    TrainResult result;
    result.split = options.split ? *options.split
                                 : split_by_problem(problems.size(), options.validation_fraction,
                                                    options.test_fraction, options.seed);

    HardwareCache hardware;
    FeatureRows train = build_rows(problems, result.split.train, hardware, options.vendor_weight);
    FeatureRows val = build_rows(problems, result.split.validation, hardware);
    // Timed configs, each once (--aten-weight repeats vendor rows in `train` only).
    result.train_rows = count_rows(select_problems(problems, result.split.train));
    result.validation_rows = val.rows;
    result.test_rows = count_rows(select_problems(problems, result.split.test));
    if (train.rows < 2) {
        throw core::InputError("dataset", "the training split has fewer than two timed configs");
    }

    ModelInfo info;
    info.spec = options.model;
    info.feature_names = feature_names();
    standardisation_stats(train, info.feature_mean, info.feature_std);
    info.hardware_name = hardware_names(problems);
    info.parallel_units = hardware.units(problems.front().hardware);
    info.toolkit_version = MMT_VERSION_STRING;
    info.learning_rate = options.learning_rate;
    info.weight_decay = options.weight_decay;
    info.batch_size = options.batch_size;
    info.num_epochs = options.num_epochs;
    info.patience = options.patience;
    info.lr_decay_after = options.lr_decay_after;
    info.lr_decay = options.lr_decay_after > 0 ? options.lr_decay : 0.0;
    info.weight_average = options.weight_average;
    info.seed = std::to_string(options.seed);
    info.train_problems = result.split.train.size();
    info.train_rows = result.train_rows;
    info.vendor_rows = options.vendor_rows;

    // Standardise once, up front: the tensors on the device are final.
    {
        const std::size_t width = num_features();
        std::vector<float> inv(width);
        for (std::size_t j = 0; j < width; ++j) inv[j] = 1.0f / info.feature_std[j];
        for (FeatureRows* rows : {&train, &val}) {
            for (std::size_t r = 0; r < rows->rows; ++r) {
                float* row = rows->x.data() + r * width;
                for (std::size_t j = 0; j < width; ++j) row[j] = (row[j] - info.feature_mean[j]) * inv[j];
            }
        }
    }
    TrainingData data;
    data.train = std::move(train);
    for (float v : data.train.y) data.target_mean += v;
    data.target_mean /= static_cast<double>(data.train.rows);
    const auto width = static_cast<std::int64_t>(num_features());
    data.x_train = to_tensor(data.train.x, static_cast<std::int64_t>(data.train.rows), width, device);
    data.y_train = to_tensor(data.train.y, static_cast<std::int64_t>(data.train.rows), 1, device);
    data.x_val = to_tensor(val.x, static_cast<std::int64_t>(val.rows), width, device);
    data.y_val = to_tensor(val.y, static_cast<std::int64_t>(val.rows), 1, device);

    // Ensemble members differ only in their seed (initial weights, batch order), and each
    // one's draws follow from its seed alone: side by side they train the networks they
    // train in turn. The first member's history is the run's history.
    std::vector<std::optional<Fit>> fits(static_cast<std::size_t>(options.ensemble));
    const auto fit_member = [&](std::size_t member) {
        fits[member] = fit_network(data, options, options.seed + member, static_cast<int>(member), device);
    };
    if (pool) {
        run_on_threads(
            fits.size(),
            [&](std::size_t member) {
                const FitPool::Slot slot(*pool);
                fit_member(member);
            },
            [&] { pool->abandon = true; });
    }
    std::vector<std::shared_ptr<RuntimeNetImpl>> members;
    double best_loss = 0.0;
    for (int member = 0; member < options.ensemble; ++member) {
        if (!pool) fit_member(static_cast<std::size_t>(member));
        Fit& fit = *fits[static_cast<std::size_t>(member)];
        if (member == 0) {
            result.history = fit.history;
            result.best_epoch = fit.best_epoch;
            result.stopped_early = fit.stopped_early;
            best_loss = fit.best_loss;
        }
        if (fit.interrupted) {
            result.interrupted = true;
            if (fit.best_epoch == 0) break;  // this member never finished an epoch
        }
        members.push_back(fit.net.ptr());
        if (result.interrupted) break;
    }
    if (members.empty()) {  // interrupted before the first epoch: an untrained network
        at::Generator unused;
        members.push_back(seeded_network(options.model, data.target_mean, options.seed, unused).ptr());
        members.back()->to(device);
    }
    RuntimeNet net = members.size() == 1 ? RuntimeNet(members.front()) : [&] {
        // Building the averaged network's layers draws default weights from the global
        // generator, which another fold's network may have just seeded.
        const std::lock_guard<std::mutex> lock(global_generator_mutex);
        return RuntimeNet(RuntimeNetImpl::average_of(members));
    }();
    net->to(device);
    net->eval();
    if (members.size() > 1) {
        info.spec = net->spec();
        best_loss = evaluate_loss(net, data.x_val, data.y_val);
    }
    info.ensemble = static_cast<int>(members.size());

    result.best_validation_loss = best_loss;
    info.epochs_run = static_cast<int>(result.history.size());
    info.best_epoch = result.best_epoch;
    info.best_validation_loss = std::isfinite(best_loss) ? best_loss : 0.0;

    result.model = Predictor(std::make_unique<Predictor::Impl>(std::move(info), std::move(net), device));
    // Even after an interrupt: the best weights so far deserve their test numbers, and
    // inference over the test split takes a moment. --test-fraction 0 leaves none.
    if (!result.split.test.empty()) {
        result.test_report = evaluate_model(result.model, select_problems(problems, result.split.test),
                                            options.top_n_worst);
    }
    return result;
}

}  // namespace

CrossValidationResult cross_validate(const std::vector<ProblemGroup>& problems, const TrainOptions& options,
                                     int folds, const std::function<void(std::size_t, const FoldResult&)>& on_fold) {
    validate_train_options(options);
    check_training_device(options.device);
    const c10::Device device = training_device(options);
    const ThreadCountScope threads = step_threads(options, device);
    const auto splits = k_fold_splits(problems.size(), folds, options.validation_fraction, options.seed);
    const int jobs = std::min<int>(concurrent_fits(options, device), static_cast<int>(splits.size()) * options.ensemble);

    // A fold's outcome and its held-out predictions; nullopt where it was interrupted.
    struct FoldOutcome {
        FoldResult fold;
        std::vector<std::vector<double>> predictions;  ///< per held-out problem
    };
    std::vector<std::optional<FoldOutcome>> outcomes(splits.size());
    std::mutex one_fold_callbacks;
    const auto run_fold = [&](const TrainOptions& fold_options_base, std::size_t f, FitPool* pool) {
        TrainOptions fold_options = fold_options_base;
        fold_options.split = splits[f];
        fold_options.on_epoch = nullptr;
        const auto start = Clock::now();
        TrainResult trained = train_in_pool(problems, fold_options, pool);
        if (trained.interrupted) return;
        FoldOutcome outcome;
        outcome.fold.train_problems = splits[f].train.size();
        outcome.fold.test_problems = splits[f].test.size();
        outcome.fold.best_epoch = trained.best_epoch;
        outcome.fold.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        outcome.fold.report = std::move(trained.test_report);
        outcome.predictions = predict_problems(trained.model, select_problems(problems, splits[f].test));
        outcomes[f] = std::move(outcome);
        const std::lock_guard<std::mutex> lock(pool ? pool->callbacks : one_fold_callbacks);
        if (on_fold) on_fold(f, outcomes[f]->fold);
    };
    if (jobs <= 1) {
        for (std::size_t f = 0; f < splits.size(); ++f) {
            run_fold(options, f, nullptr);
            if (!outcomes[f]) break;
        }
    } else {
        // Every fold on a thread of its own; their members share the pool's slots.
        FitPool pool(jobs);
        const TrainOptions shared = pool.shared(options);
        run_on_threads(splits.size(), [&](std::size_t f) { run_fold(shared, f, &pool); }, [&] { pool.abandon = true; });
    }

    // Folds in order, up to the first one interrupted.
    CrossValidationResult result;
    for (std::size_t f = 0; f < splits.size(); ++f) {
        if (!outcomes[f]) {
            result.interrupted = true;
            break;
        }
        auto fold_problems = select_problems(problems, splits[f].test);
        result.held_out_fold.insert(result.held_out_fold.end(), fold_problems.size(), static_cast<int>(f));
        std::move(fold_problems.begin(), fold_problems.end(), std::back_inserter(result.held_out));
        std::move(outcomes[f]->predictions.begin(), outcomes[f]->predictions.end(),
                  std::back_inserter(result.held_out_log_ms));
        result.folds.push_back(std::move(outcomes[f]->fold));
    }
    if (!result.held_out.empty()) {
        result.pooled = evaluate_predictions(result.held_out, result.held_out_log_ms, options.top_n_worst);
    }
    return result;
}

}  // namespace mmt::model
