#include "matmul_toolkit/model/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "checkpoint_reader.hpp"
#include "inference_model_impl.hpp"
#include "predictor_impl.hpp"
#include "torch_archive.hpp"

namespace mmt::model {
namespace {

c10::Device parse_device(const std::string& device) {
    if (device == "cpu") return c10::Device(c10::kCPU);
    if (device == "cuda") {
        if (!torch::cuda::is_available()) {
            throw core::InputError("--device", "cuda requested but LibTorch sees no CUDA device");
        }
        return c10::Device(c10::kCUDA, 0);
    }
    throw core::InputError("--device", "unknown device '" + device + "' (expected cpu or cuda)");
}

at::Tensor float_tensor(const std::vector<float>& values) {
    return torch::tensor(at::ArrayRef<float>(values), torch::kFloat32);
}

/// Copies a checkpoint's state dict (read_checkpoint checked it against the architecture)
/// into the network's parameters and buffers.
void load_state(RuntimeNet& net, const StateDict& state) {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : net->state_dict()) {
        const StateTensor* stored = find_state(state, name);
        if (stored == nullptr) throw core::Error("model", "the checkpoint's state dict lacks '" + name + "'");
        const auto values = torch::from_blob(const_cast<double*>(stored->values.data()), stored->sizes, torch::kFloat64);
        tensor.copy_(values);
    }
}

}  // namespace

// ---- Impl -----------------------------------------------------------------------------

namespace {

RuntimeNet& in_eval_mode(RuntimeNet& net, c10::Device device) {
    net->to(device);
    net->eval();
    return net;
}

}  // namespace

Predictor::Impl::Impl(ModelInfo info_in, RuntimeNet net_in, c10::Device device_in)
    : info(std::move(info_in)), net(std::move(net_in)), device(device_in) {
    const FoldedNetwork plain = in_eval_mode(net, device)->fold();
    inference = InferenceModel(std::make_shared<const InferenceModel::Impl>(info, plain));
    folded = FoldedNet(plain, device);
}

std::vector<double> Predictor::Impl::forward(const float* standardised, std::size_t rows) const {
    // One problem's configs, or a validation batch: the calling thread does it faster than
    // LibTorch's operators and BLAS threads (see dense_net.hpp).
    if (device.type() == c10::kCPU && rows <= kDenseRows) return inference.forward(standardised, rows);
    std::vector<double> out(rows);
    c10::InferenceMode guard;
    const auto width = static_cast<std::int64_t>(num_features());
    for (std::size_t start = 0; start < rows; start += batch_size) {
        const std::size_t count = std::min(batch_size, rows - start);
        auto input = torch::from_blob(const_cast<float*>(standardised + start * num_features()),
                                      {static_cast<std::int64_t>(count), width}, torch::kFloat32);
        if (device.type() != c10::kCPU) input = input.to(device);
        auto result = folded.forward(input).reshape({-1});
        if (device.type() != c10::kCPU) result = result.to(torch::kCPU);
        result = result.contiguous();
        const float* values = result.data_ptr<float>();
        for (std::size_t i = 0; i < count; ++i) out[start + i] = values[i];
    }
    return out;
}

// ---- Predictor ------------------------------------------------------------------------

Predictor::Predictor() = default;
Predictor::Predictor(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;
Predictor::~Predictor() = default;

const Predictor::Impl& Predictor::loaded() const {
    if (!m_impl) throw core::Error("model", "no model loaded");
    return *m_impl;
}

const ModelInfo& Predictor::info() const { return loaded().info; }

const InferenceModel& Predictor::inference() const { return loaded().inference; }

void Predictor::set_batch_size(std::size_t rows) {
    loaded();
    m_impl->batch_size = std::max<std::size_t>(1, rows);
}

std::vector<double> Predictor::predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                              const std::vector<core::GemmConfig>& configs,
                                              int parallel_units) const {
    const auto& model = loaded();
    thread_local std::vector<float> rows;  // reused: fresh buffers cost a page fault per page
    model.inference.standardised_rows(op_key, shape, configs, parallel_units, rows);
    return model.forward(rows.data(), configs.size());
}

std::vector<double> Predictor::predict_ms(const std::string& op_key, const core::MMShape& shape,
                                          const std::vector<core::GemmConfig>& configs,
                                          int parallel_units) const {
    auto values = predict_log_ms(op_key, shape, configs, parallel_units);
    for (auto& v : values) v = std::exp(v);
    return values;
}

std::vector<double> Predictor::predict_log_ms(const std::vector<PredictionQuery>& queries) const {
    const auto& model = loaded();
    std::vector<float> rows;
    model.inference.standardised_rows(queries, rows);
    return model.forward(rows.data(), queries.size());
}

std::vector<std::size_t> Predictor::rank(const std::string& op_key, const core::MMShape& shape,
                                         const std::vector<core::GemmConfig>& configs,
                                         int parallel_units) const {
    const auto predicted = predict_log_ms(op_key, shape, configs, parallel_units);
    std::vector<std::size_t> order(configs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return predicted[a] < predicted[b]; });
    return order;
}

void Predictor::save(const std::filesystem::path& path) const {
    const auto& model = loaded();
    const ModelInfo& info = model.info;
    const bool base = info.spec.type == ModelType::base;

    auto int_list = [](const std::vector<int>& values) {
        auto list = PyValue::make_list();
        for (int v : values) list.append(PyValue::from_int(v));
        return list;
    };
    auto architecture = [&](PyValue& dict) {
        if (base) {
            dict.set("hidden_dims", int_list(info.spec.hidden_dims));
        } else {
            dict.set("hidden_dim", PyValue::from_int(info.spec.hidden_dim));
            dict.set("num_layers", PyValue::from_int(info.spec.num_layers));
        }
        dict.set("dropout_rate", PyValue::from_double(info.spec.dropout_rate));
    };

    auto root = PyValue::make_dict();
    root.set("format", PyValue::from_string(kCheckpointFormat));
    root.set("format_version", PyValue::from_int(kCheckpointFormatVersion));
    root.set("toolkit_version", PyValue::from_string(info.toolkit_version));
    root.set("model_type", PyValue::from_string(to_string(info.spec.type)));
    // torch-diode's checkpoint keys, so its model classes can be built from this file.
    root.set("problem_feature_dim", PyValue::from_int(static_cast<std::int64_t>(num_problem_features())));
    root.set("config_feature_dim", PyValue::from_int(static_cast<std::int64_t>(num_config_features())));
    architecture(root);

    auto hyper = PyValue::make_dict();
    hyper.set("model_type", PyValue::from_string(to_string(info.spec.type)));
    architecture(hyper);
    hyper.set("learning_rate", PyValue::from_double(info.learning_rate));
    hyper.set("weight_decay", PyValue::from_double(info.weight_decay));
    hyper.set("batch_size", PyValue::from_int(info.batch_size));
    hyper.set("num_epochs", PyValue::from_int(info.num_epochs));
    hyper.set("patience", PyValue::from_int(info.patience));
    hyper.set("lr_decay_after", PyValue::from_int(info.lr_decay_after));
    hyper.set("lr_decay", PyValue::from_double(info.lr_decay));
    hyper.set("weight_average", PyValue::from_double(info.weight_average));
    hyper.set("seed", PyValue::from_string(info.seed));
    root.set("hyperparameters", std::move(hyper));

    auto names = PyValue::make_list();
    for (const auto& n : info.feature_names) names.append(PyValue::from_string(n));
    root.set("feature_names", std::move(names));
    root.set("feature_mean", PyValue::from_tensor(float_tensor(info.feature_mean)));
    root.set("feature_std", PyValue::from_tensor(float_tensor(info.feature_std)));
    root.set("target", PyValue::from_string("ln(time_ms)"));
    root.set("hardware_name", PyValue::from_string(info.hardware_name));
    root.set("parallel_units", PyValue::from_int(info.parallel_units));
    root.set("vendor_rows", PyValue::from_int(info.vendor_rows ? 1 : 0));
    root.set("ensemble", PyValue::from_int(info.ensemble));

    auto training = PyValue::make_dict();
    training.set("epochs_run", PyValue::from_int(info.epochs_run));
    training.set("best_epoch", PyValue::from_int(info.best_epoch));
    training.set("best_validation_loss", PyValue::from_double(info.best_validation_loss));
    training.set("train_problems", PyValue::from_int(static_cast<std::int64_t>(info.train_problems)));
    training.set("train_rows", PyValue::from_int(static_cast<std::int64_t>(info.train_rows)));
    root.set("training", std::move(training));

    auto state = PyValue::make_dict();
    for (const auto& [name, tensor] : model.net->state_dict()) state.set(name, PyValue::from_tensor(tensor));
    root.set("model_state_dict", std::move(state));

    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    core::write_file_atomically(path, write_torch_archive(root));
}

Predictor Predictor::load(const std::filesystem::path& path, const std::string& device_name) {
    const c10::Device device = parse_device(device_name);
    Checkpoint checkpoint = read_checkpoint(path);
    RuntimeNet net(checkpoint.info.spec, static_cast<int>(num_features()));
    load_state(net, checkpoint.state);
    return Predictor(std::make_unique<Impl>(std::move(checkpoint.info), std::move(net), device));
}

}  // namespace mmt::model
