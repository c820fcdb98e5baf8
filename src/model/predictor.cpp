#include "matmul_toolkit/model/predictor.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "predictor_impl.hpp"
#include "torch_archive.hpp"
#include "torch_archive_check.hpp"

namespace mmt::model {
namespace {

constexpr const char* kFormatName = "matmul_toolkit.runtime_model";
constexpr std::int64_t kFormatVersion = 1;

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

// ---- reading a checkpoint ------------------------------------------------------------

class CheckpointReader {
public:
    CheckpointReader(c10::Dict<c10::IValue, c10::IValue> dict, std::string path)
        : m_dict(std::move(dict)), m_path(std::move(path)) {}

    bool has(const std::string& key) const { return m_dict.find(c10::IValue(key)) != m_dict.end(); }

    c10::IValue get(const std::string& key) const {
        auto it = m_dict.find(c10::IValue(key));
        if (it == m_dict.end()) fail("missing key '" + key + "'");
        return it->value();
    }

    std::string get_string(const std::string& key) const {
        auto v = get(key);
        if (!v.isString()) fail("'" + key + "' is not a string");
        return v.toStringRef();
    }

    std::int64_t get_int(const std::string& key) const {
        auto v = get(key);
        if (!v.isInt()) fail("'" + key + "' is not an integer");
        return v.toInt();
    }

    double get_double(const std::string& key) const {
        auto v = get(key);
        if (v.isDouble()) return v.toDouble();
        if (v.isInt()) return static_cast<double>(v.toInt());
        fail("'" + key + "' is not a number");
    }

    std::vector<std::string> get_strings(const std::string& key) const {
        auto v = get(key);
        if (!v.isList()) fail("'" + key + "' is not a list");
        std::vector<std::string> out;
        for (const auto& item : v.toListRef()) {
            if (!item.isString()) fail("'" + key + "' holds a non-string");
            out.push_back(item.toStringRef());
        }
        return out;
    }

    std::vector<int> get_ints(const std::string& key) const {
        auto v = get(key);
        if (!v.isList()) fail("'" + key + "' is not a list");
        std::vector<int> out;
        for (const auto& item : v.toListRef()) {
            if (!item.isInt()) fail("'" + key + "' holds a non-integer");
            out.push_back(static_cast<int>(item.toInt()));
        }
        return out;
    }

    std::vector<float> get_floats(const std::string& key) const {
        auto v = get(key);
        std::vector<float> out;
        if (v.isTensor()) {
            auto t = v.toTensor().to(torch::kCPU, torch::kFloat32).contiguous().reshape({-1});
            out.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
        } else if (v.isList()) {
            for (const auto& item : v.toListRef()) {
                if (item.isDouble()) out.push_back(static_cast<float>(item.toDouble()));
                else if (item.isInt()) out.push_back(static_cast<float>(item.toInt()));
                else fail("'" + key + "' holds a non-number");
            }
        } else {
            fail("'" + key + "' is neither a tensor nor a list of numbers");
        }
        return out;
    }

    CheckpointReader sub(const std::string& key) const {
        auto v = get(key);
        if (!v.isGenericDict()) fail("'" + key + "' is not a dict");
        return CheckpointReader(v.toGenericDict(), m_path);
    }

    const c10::Dict<c10::IValue, c10::IValue>& dict() const { return m_dict; }

    [[noreturn]] void fail(const std::string& what) const {
        throw core::InputError(m_path, "not a valid matmul_toolkit model checkpoint: " + what);
    }

private:
    c10::Dict<c10::IValue, c10::IValue> m_dict;
    std::string m_path;
};

std::string first_line(const std::string& text) {
    const auto end = text.find('\n');
    return end == std::string::npos ? text : text.substr(0, end);
}

// The Linear weights alone (a lower bound on the parameters): what the file must hold.
double min_parameter_count(const ModelSpec& spec, std::size_t inputs) {
    double count = 0.0;
    double width = static_cast<double>(inputs);
    if (spec.type == ModelType::base) {
        for (int d : spec.hidden_dims) {
            count += width * d;
            width = d;
        }
    } else {
        width = spec.hidden_dim;
        count += static_cast<double>(inputs) * width + 2.0 * width * width * spec.num_layers;
    }
    return count + width;
}

void check_features(const std::vector<std::string>& stored, const std::string& path) {
    const auto& current = feature_names();
    if (stored == current) return;
    std::ostringstream what;
    what << "the model was trained with " << stored.size() << " features but this build computes "
         << current.size();
    for (std::size_t i = 0; i < std::min(stored.size(), current.size()); ++i) {
        if (stored[i] != current[i]) {
            what << " (feature " << i << " is '" << stored[i] << "' in the model, '" << current[i]
                 << "' here)";
            break;
        }
    }
    what << "; retrain the model with this version of matmul_toolkit";
    throw core::InputError(path, what.str());
}

void load_state_dict(RuntimeNet& net, const CheckpointReader& state) {
    torch::NoGradGuard no_grad;
    auto expected = net->state_dict();
    for (auto& [name, tensor] : expected) {
        auto v = state.get(name);
        if (!v.isTensor()) state.fail("model_state_dict['" + name + "'] is not a tensor");
        const auto& stored = v.toTensor();
        if (stored.sizes() != tensor.sizes()) {
            std::ostringstream what;
            what << "model_state_dict['" << name << "'] has shape " << stored.sizes()
                 << ", the architecture needs " << tensor.sizes();
            state.fail(what.str());
        }
        tensor.copy_(stored);
    }
    if (state.dict().size() != expected.size()) {
        for (const auto& entry : state.dict()) {
            const std::string key = entry.key().isString() ? entry.key().toStringRef() : "?";
            const bool known = std::any_of(expected.begin(), expected.end(),
                                           [&](const auto& e) { return e.first == key; });
            if (!known) state.fail("model_state_dict has an unexpected entry '" + key + "'");
        }
    }
}

}  // namespace

// ---- Impl -----------------------------------------------------------------------------

Predictor::Impl::Impl(ModelInfo info_in, RuntimeNet net_in, c10::Device device_in)
    : info(std::move(info_in)), net(std::move(net_in)), device(device_in) {
    inv_std.resize(info.feature_std.size());
    for (std::size_t i = 0; i < inv_std.size(); ++i) inv_std[i] = 1.0f / info.feature_std[i];
    net->to(device);
    net->eval();
    folded = net->fold();
    dense = folded.to_dense();
}

void Predictor::Impl::standardise(float* rows, std::size_t count) const {
    const std::size_t width = inv_std.size();
    const float* mean = info.feature_mean.data();
    const float* scale = inv_std.data();
    for (std::size_t r = 0; r < count; ++r) {
        float* row = rows + r * width;
        for (std::size_t j = 0; j < width; ++j) row[j] = (row[j] - mean[j]) * scale[j];
    }
}

std::vector<double> Predictor::Impl::forward(const float* standardised, std::size_t rows) const {
    std::vector<double> out(rows);
    if (rows == 0) return out;
    if (device.type() == c10::kCPU && rows <= kDenseRows) {
        // One problem's configs, or a validation batch: the calling thread does it faster
        // than LibTorch's operators and BLAS threads (see dense_net.hpp).
        // Reused per thread: fresh buffers would cost a page fault per page on every call.
        thread_local DenseScratch scratch;
        thread_local std::vector<float> values;
        values.resize(rows);
        dense.forward(standardised, rows, values.data(), scratch);
        std::copy(values.begin(), values.end(), out.begin());
        return out;
    }
    c10::InferenceMode guard;
    const auto width = static_cast<std::int64_t>(inv_std.size());
    for (std::size_t start = 0; start < rows; start += batch_size) {
        const std::size_t count = std::min(batch_size, rows - start);
        auto input = torch::from_blob(const_cast<float*>(standardised + start * inv_std.size()),
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

void Predictor::set_batch_size(std::size_t rows) {
    loaded();
    m_impl->batch_size = std::max<std::size_t>(1, rows);
}

std::vector<double> Predictor::predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                              const std::vector<core::GemmConfig>& configs,
                                              int parallel_units) const {
    const auto& model = loaded();
    const ProblemFeatures problem(op_key, shape,
                                  parallel_units > 0 ? parallel_units : model.info.parallel_units);
    const std::size_t width = num_features();
    thread_local std::vector<float> rows;  // reused: see Impl::forward
    rows.resize(configs.size() * width);
    for (std::size_t i = 0; i < configs.size(); ++i) problem.write(configs[i], rows.data() + i * width);
    model.standardise(rows.data(), configs.size());
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
    const std::size_t width = num_features();
    std::vector<float> rows(queries.size() * width);
    for (std::size_t i = 0; i < queries.size(); ++i) {
        const auto& q = queries[i];
        ProblemFeatures(q.op_key, q.shape, q.parallel_units > 0 ? q.parallel_units : model.info.parallel_units)
            .write(q.config, rows.data() + i * width);
    }
    model.standardise(rows.data(), queries.size());
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
    root.set("format", PyValue::from_string(kFormatName));
    root.set("format_version", PyValue::from_int(kFormatVersion));
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
    const std::string where = path.string();
    const c10::Device device = parse_device(device_name);
    const std::string bytes = core::read_file(path);
    // LibTorch's reader trusts the archive (a truncated one made it read past the buffer):
    // nothing reaches it that our own walk of the zip and the pickle has not accepted.
    const TorchArchiveSummary archive = check_torch_archive(bytes, where);
    c10::IValue root;
    try {
        root = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    } catch (const std::exception& e) {
        throw core::InputError(where, "cannot read the PyTorch archive: " + first_line(e.what()));
    }
    if (!root.isGenericDict()) {
        throw core::InputError(where, "not a matmul_toolkit model checkpoint (the archive holds no dict)");
    }
    CheckpointReader file(root.toGenericDict(), where);
    if (!file.has("format") || file.get_string("format") != kFormatName) {
        throw core::InputError(where, "not a matmul_toolkit model checkpoint (no format '" +
                                          std::string(kFormatName) + "'; a torch-diode checkpoint "
                                          "uses other features and can't be loaded)");
    }
    if (file.get_int("format_version") != kFormatVersion) {
        throw core::InputError(where, "checkpoint format version " +
                                          std::to_string(file.get_int("format_version")) +
                                          " is not supported (expected " + std::to_string(kFormatVersion) + ")");
    }

    ModelInfo info;
    info.feature_names = file.get_strings("feature_names");
    check_features(info.feature_names, where);
    info.spec.type = parse_model_type(file.get_string("model_type"));
    if (info.spec.type == ModelType::base) {
        info.spec.hidden_dims = file.get_ints("hidden_dims");
    } else {
        info.spec.hidden_dim = static_cast<int>(file.get_int("hidden_dim"));
        info.spec.num_layers = static_cast<int>(file.get_int("num_layers"));
    }
    info.spec.dropout_rate = file.get_double("dropout_rate");
    try {
        info.spec.validate();
    } catch (const core::InputError& e) {
        file.fail(e.what());
    }
    info.feature_mean = file.get_floats("feature_mean");
    info.feature_std = file.get_floats("feature_std");
    if (info.feature_mean.size() != num_features() || info.feature_std.size() != num_features()) {
        file.fail("feature_mean / feature_std do not have one entry per feature");
    }
    for (float s : info.feature_std) {
        if (!(s > 0.0f) || !std::isfinite(s)) file.fail("feature_std holds a non-positive value");
    }
    info.hardware_name = file.get_string("hardware_name");
    info.parallel_units = static_cast<int>(file.get_int("parallel_units"));
    if (info.parallel_units <= 0) file.fail("parallel_units is not positive");
    info.toolkit_version = file.has("toolkit_version") ? file.get_string("toolkit_version") : "";
    info.vendor_rows = file.has("vendor_rows") && file.get_int("vendor_rows") != 0;
    info.ensemble = file.has("ensemble") ? static_cast<int>(file.get_int("ensemble")) : 1;
    if (file.has("hyperparameters")) {
        const auto hyper = file.sub("hyperparameters");
        if (hyper.has("learning_rate")) info.learning_rate = hyper.get_double("learning_rate");
        if (hyper.has("weight_decay")) info.weight_decay = hyper.get_double("weight_decay");
        if (hyper.has("batch_size")) info.batch_size = static_cast<int>(hyper.get_int("batch_size"));
        if (hyper.has("num_epochs")) info.num_epochs = static_cast<int>(hyper.get_int("num_epochs"));
        if (hyper.has("patience")) info.patience = static_cast<int>(hyper.get_int("patience"));
        if (hyper.has("lr_decay_after")) info.lr_decay_after = static_cast<int>(hyper.get_int("lr_decay_after"));
        if (hyper.has("lr_decay")) info.lr_decay = hyper.get_double("lr_decay");
        if (hyper.has("weight_average")) info.weight_average = hyper.get_double("weight_average");
        if (hyper.has("seed")) info.seed = hyper.get_string("seed");
    }
    if (file.has("training")) {
        const auto training = file.sub("training");
        info.epochs_run = static_cast<int>(training.get_int("epochs_run"));
        info.best_epoch = static_cast<int>(training.get_int("best_epoch"));
        info.best_validation_loss = training.get_double("best_validation_loss");
        info.train_problems = static_cast<std::size_t>(training.get_int("train_problems"));
        info.train_rows = static_cast<std::size_t>(training.get_int("train_rows"));
    }

    // The weights are in the file, so an architecture needing more than it holds is refused
    // before LibTorch allocates it (a 4-byte hidden size could ask for terabytes).
    if (const double needed = min_parameter_count(info.spec, num_features());
        needed > static_cast<double>(archive.storage_elements)) {
        file.fail("the architecture needs at least " + std::to_string(static_cast<std::uint64_t>(std::min(needed, 1e18))) +
                  " weights, the file holds " + std::to_string(archive.storage_elements));
    }
    RuntimeNet net(info.spec, static_cast<int>(num_features()));
    load_state_dict(net, file.sub("model_state_dict"));
    return Predictor(std::make_unique<Impl>(std::move(info), std::move(net), device));
}

}  // namespace mmt::model
