#include "matmul_toolkit/model/table_model.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kFormat = "matmul_toolkit.table_mlp";

double activate(const std::string& activation, double v) {
    if (activation == "relu") return v > 0.0 ? v : 0.0;
    if (activation == "tanh") return std::tanh(v);
    if (activation == "logistic") return 1.0 / (1.0 + std::exp(-v));
    return v;  // identity
}

bool known_activation(const std::string& a) {
    return a == "relu" || a == "identity" || a == "tanh" || a == "logistic";
}

/// Seeded row order (Fisher-Yates on mt19937_64, the same everywhere).
std::vector<std::size_t> shuffled(std::size_t count, std::uint64_t seed) {
    std::vector<std::size_t> order(count);
    for (std::size_t i = 0; i < count; ++i) order[i] = i;
    std::mt19937_64 rng(seed);
    for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
    return order;
}

void take_rows(const std::vector<double>& x, const std::vector<double>& y, std::size_t features,
               const std::vector<std::size_t>& rows, std::vector<double>& x_out, std::vector<double>& y_out) {
    for (auto r : rows) {
        x_out.insert(x_out.end(), x.begin() + static_cast<std::ptrdiff_t>(r * features),
                     x.begin() + static_cast<std::ptrdiff_t>((r + 1) * features));
        y_out.push_back(y[r]);
    }
}

}  // namespace

std::vector<double> TableMlp::predict(const std::vector<double>& rows) const {
    const std::size_t features = feature_mean.size();
    std::vector<double> out;
    if (features == 0) return out;
    const std::size_t count = rows.size() / features;
    out.reserve(count);
    std::vector<double> h, next;
    for (std::size_t r = 0; r < count; ++r) {
        h.assign(rows.begin() + static_cast<std::ptrdiff_t>(r * features),
                 rows.begin() + static_cast<std::ptrdiff_t>((r + 1) * features));
        for (std::size_t j = 0; j < features; ++j) h[j] = (h[j] - feature_mean[j]) / feature_std[j];
        for (const auto& layer : layers) {
            next.assign(layer.intercepts.begin(), layer.intercepts.end());
            for (std::size_t i = 0; i < layer.inputs; ++i) {
                const double v = h[i];
                const double* w = layer.coefs.data() + i * layer.outputs;
                for (std::size_t o = 0; o < layer.outputs; ++o) next[o] += v * w[o];
            }
            for (auto& v : next) v = activate(layer.activation, v);
            h.swap(next);
        }
        out.push_back(h[0] * target_std + target_mean);
    }
    return out;
}

void validate_table_options(const TableTrainOptions& o) {
    if (o.hidden.empty()) throw core::InputError("--hidden-dims", "give at least one hidden layer");
    for (int w : o.hidden) {
        if (w < 1) throw core::InputError("--hidden-dims", "sizes must be positive");
    }
    if (o.epochs < 0) throw core::InputError("--epochs", "must not be negative");
    if (o.batch_size < 1) throw core::InputError("--batch-size", "must be at least 1");
    if (!(o.learning_rate > 0.0)) throw core::InputError("--learning-rate", "must be positive");
    if (o.weight_decay < 0.0) throw core::InputError("--weight-decay", "must not be negative");
    if (!(o.test_fraction > 0.0 && o.test_fraction < 1.0)) {
        throw core::InputError("--test-fraction", "must be between 0 and 1");
    }
}

void score_table_mlp(const TableMlp& model, const std::vector<double>& x, const std::vector<double>& y,
                     TableModelReport& report) {
    const auto predicted = model.predict(x);
    double mean = 0.0;
    for (double v : y) mean += v;
    mean /= static_cast<double>(std::max<std::size_t>(y.size(), 1));
    double ss_res = 0.0, ss_tot = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        ss_res += (predicted[i] - y[i]) * (predicted[i] - y[i]);
        ss_tot += (y[i] - mean) * (y[i] - mean);
    }
    report.rmse = std::sqrt(ss_res / static_cast<double>(std::max<std::size_t>(y.size(), 1)));
    report.r2 = ss_tot > 0.0 ? 1.0 - ss_res / ss_tot : std::nan("");
}

TableMlp train_table_mlp(const std::vector<double>& x, const std::vector<double>& y, std::size_t features,
                         const TableTrainOptions& options, const TableMlp* init, TableModelReport& report) {
    validate_table_options(options);
    const std::size_t n = y.size();
    if (features == 0 || x.size() != n * features) throw core::InputError("train-table", "feature rows do not match the targets");
    if (n < 4) throw core::InputError(report.group.empty() ? "train-table" : "group '" + report.group + "'",
                                      std::to_string(n) + " rows; a model needs at least 4 (train and test)");
    const std::size_t n_test = std::clamp<std::size_t>(
        static_cast<std::size_t>(std::llround(options.test_fraction * static_cast<double>(n))), 1, n - 2);
    const auto order = shuffled(n, options.seed);
    const std::vector<std::size_t> test_rows(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_test));
    const std::vector<std::size_t> train_rows(order.begin() + static_cast<std::ptrdiff_t>(n_test), order.end());
    std::vector<double> x_train, y_train, x_test, y_test;
    take_rows(x, y, features, train_rows, x_train, y_train);
    take_rows(x, y, features, test_rows, x_test, y_test);
    report.train_rows = train_rows.size();
    report.test_rows = test_rows.size();

    TableMlp model;
    model.group = report.group;
    if (init) {
        if (init->feature_mean.size() != features) {
            throw core::InputError("--init-from", "the model reads " + std::to_string(init->feature_mean.size()) +
                                                      " features, the table gives " + std::to_string(features));
        }
        // The imported weights mean something only with their own scaler.
        model.feature_mean = init->feature_mean;
        model.feature_std = init->feature_std;
        model.target_mean = init->target_mean;
        model.target_std = init->target_std;
    } else {
        model.feature_mean.assign(features, 0.0);
        model.feature_std.assign(features, 0.0);
        const double rows = static_cast<double>(train_rows.size());
        for (std::size_t r = 0; r < train_rows.size(); ++r) {
            for (std::size_t j = 0; j < features; ++j) model.feature_mean[j] += x_train[r * features + j] / rows;
            model.target_mean += y_train[r] / rows;
        }
        double target_var = 0.0;
        for (std::size_t r = 0; r < train_rows.size(); ++r) {
            for (std::size_t j = 0; j < features; ++j) {
                const double d = x_train[r * features + j] - model.feature_mean[j];
                model.feature_std[j] += d * d / rows;
            }
            target_var += (y_train[r] - model.target_mean) * (y_train[r] - model.target_mean) / rows;
        }
        // A constant column is centred but not scaled (scikit-learn's StandardScaler does the same).
        for (auto& s : model.feature_std) s = s > 0.0 ? std::sqrt(s) : 1.0;
        model.target_std = target_var > 0.0 ? std::sqrt(target_var) : 1.0;
    }

    torch::manual_seed(options.seed);
    torch::nn::Sequential net;
    std::vector<torch::nn::Linear> linears;
    std::int64_t in = static_cast<std::int64_t>(features);
    for (int width : options.hidden) {
        linears.emplace_back(in, width);
        in = width;
    }
    linears.emplace_back(in, 1);
    for (std::size_t i = 0; i < linears.size(); ++i) {
        net->push_back(linears[i]);
        if (i + 1 < linears.size()) net->push_back(torch::nn::ReLU());
    }
    net->to(torch::kFloat64);
    {
        torch::NoGradGuard no_grad;
        if (init) {
            if (init->layers.size() != linears.size()) {
                throw core::InputError("--init-from", "the model has " + std::to_string(init->layers.size()) +
                                                          " layers; --hidden-dims gives " + std::to_string(linears.size()));
            }
            for (std::size_t i = 0; i < linears.size(); ++i) {
                const auto& layer = init->layers[i];
                auto& weight = linears[i]->weight;  // out x in
                if (static_cast<std::int64_t>(layer.inputs) != weight.size(1) ||
                    static_cast<std::int64_t>(layer.outputs) != weight.size(0)) {
                    throw core::InputError("--init-from", "layer " + std::to_string(i + 1) + " is " +
                                                              std::to_string(layer.inputs) + "x" + std::to_string(layer.outputs) +
                                                              "; --hidden-dims gives " + std::to_string(weight.size(1)) + "x" +
                                                              std::to_string(weight.size(0)));
                }
                if (layer.activation != (i + 1 < linears.size() ? "relu" : "identity")) {
                    throw core::InputError("--init-from", "training needs relu hidden layers and an identity output");
                }
                auto coefs = torch::from_blob(const_cast<double*>(layer.coefs.data()),
                                              {static_cast<std::int64_t>(layer.inputs), static_cast<std::int64_t>(layer.outputs)},
                                              torch::kFloat64);
                weight.copy_(coefs.t());
                linears[i]->bias.copy_(torch::from_blob(const_cast<double*>(layer.intercepts.data()),
                                                        {static_cast<std::int64_t>(layer.outputs)}, torch::kFloat64));
            }
        }
    }

    if (options.epochs > 0) {
        auto standardised = x_train;
        for (std::size_t r = 0; r < train_rows.size(); ++r) {
            for (std::size_t j = 0; j < features; ++j) {
                auto& v = standardised[r * features + j];
                v = (v - model.feature_mean[j]) / model.feature_std[j];
            }
        }
        std::vector<double> target(y_train.size());
        for (std::size_t r = 0; r < target.size(); ++r) target[r] = (y_train[r] - model.target_mean) / model.target_std;
        const auto rows = static_cast<std::int64_t>(train_rows.size());
        const at::Tensor xt = torch::from_blob(standardised.data(), {rows, static_cast<std::int64_t>(features)}, torch::kFloat64).clone();
        const at::Tensor yt = torch::from_blob(target.data(), {rows, 1}, torch::kFloat64).clone();
        torch::optim::Adam optimizer(net->parameters(),
                                     torch::optim::AdamOptions(options.learning_rate).weight_decay(options.weight_decay));
        for (int epoch = 0; epoch < options.epochs; ++epoch) {
            const at::Tensor perm = torch::randperm(rows, torch::kLong);
            for (std::int64_t start = 0; start < rows; start += options.batch_size) {
                const at::Tensor index = perm.slice(0, start, std::min(rows, start + options.batch_size));
                optimizer.zero_grad();
                const at::Tensor loss = torch::nn::functional::mse_loss(net->forward(xt.index_select(0, index)),
                                                                        yt.index_select(0, index));
                loss.backward();
                optimizer.step();
            }
        }
    }

    if (init && options.epochs == 0) {
        model.layers = init->layers;  // unchanged, to the bit
    } else {
        for (std::size_t i = 0; i < linears.size(); ++i) {
            TableLayer layer;
            const at::Tensor coefs = linears[i]->weight.detach().t().contiguous();  // in x out
            layer.inputs = static_cast<std::size_t>(coefs.size(0));
            layer.outputs = static_cast<std::size_t>(coefs.size(1));
            layer.coefs.assign(coefs.data_ptr<double>(), coefs.data_ptr<double>() + coefs.numel());
            const at::Tensor bias = linears[i]->bias.detach().contiguous();
            layer.intercepts.assign(bias.data_ptr<double>(), bias.data_ptr<double>() + bias.numel());
            layer.activation = i + 1 < linears.size() ? "relu" : "identity";
            model.layers.push_back(std::move(layer));
        }
    }
    score_table_mlp(model, x_test, y_test, report);
    return model;
}

std::string table_models_to_json(const TableModelFile& file) {
    Json j;
    j["format"] = kFormat;
    j["version"] = 1;
    j["features"] = file.features;
    j["target"] = file.target;
    j["group_by"] = file.group_by.empty() ? Json(nullptr) : Json(file.group_by);
    j["models"] = Json::array();
    for (const auto& m : file.models) {
        Json model;
        model["group"] = file.group_by.empty() ? Json(nullptr) : Json(m.group);
        model["scaler"] = {{"mean", m.feature_mean}, {"std", m.feature_std}};
        model["target_scaler"] = {{"mean", m.target_mean}, {"std", m.target_std}};
        model["layers"] = Json::array();
        for (const auto& layer : m.layers) {
            Json coefs = Json::array();
            for (std::size_t i = 0; i < layer.inputs; ++i) {
                coefs.push_back(std::vector<double>(layer.coefs.begin() + static_cast<std::ptrdiff_t>(i * layer.outputs),
                                                    layer.coefs.begin() + static_cast<std::ptrdiff_t>((i + 1) * layer.outputs)));
            }
            model["layers"].push_back({{"coefs", coefs}, {"intercepts", layer.intercepts}, {"activation", layer.activation}});
        }
        j["models"].push_back(model);
    }
    return j.dump(1) + "\n";
}

TableModelFile table_models_from_json(const std::string& text, const std::string& subject) {
    TableModelFile file;
    try {
        const Json j = Json::parse(text);
        if (j.value("format", std::string()) != kFormat) {
            throw core::InputError(subject, std::string("not a table model file (expected \"format\": \"") + kFormat + "\")");
        }
        file.features = j.at("features").get<std::vector<std::string>>();
        file.target = j.at("target").get<std::string>();
        if (!j.at("group_by").is_null()) file.group_by = j.at("group_by").get<std::string>();
        for (const auto& m : j.at("models")) {
            TableMlp model;
            if (!m.at("group").is_null()) model.group = m.at("group").get<std::string>();
            model.feature_mean = m.at("scaler").at("mean").get<std::vector<double>>();
            model.feature_std = m.at("scaler").at("std").get<std::vector<double>>();
            model.target_mean = m.at("target_scaler").at("mean").get<double>();
            model.target_std = m.at("target_scaler").at("std").get<double>();
            if (model.feature_mean.size() != file.features.size() || model.feature_std.size() != file.features.size()) {
                throw core::InputError(subject, "a scaler's size differs from the feature count");
            }
            std::size_t inputs = file.features.size();
            for (const auto& l : m.at("layers")) {
                TableLayer layer;
                const auto rows = l.at("coefs").get<std::vector<std::vector<double>>>();
                layer.inputs = rows.size();
                layer.outputs = rows.empty() ? 0 : rows.front().size();
                for (const auto& row : rows) {
                    if (row.size() != layer.outputs) throw core::InputError(subject, "a layer's coefs rows differ in length");
                    layer.coefs.insert(layer.coefs.end(), row.begin(), row.end());
                }
                layer.intercepts = l.at("intercepts").get<std::vector<double>>();
                layer.activation = l.at("activation").get<std::string>();
                if (layer.inputs != inputs || layer.intercepts.size() != layer.outputs || layer.outputs == 0) {
                    throw core::InputError(subject, "layer " + std::to_string(model.layers.size() + 1) +
                                                        ": sizes do not chain (" + std::to_string(layer.inputs) + " inputs, " +
                                                        std::to_string(inputs) + " expected)");
                }
                if (!known_activation(layer.activation)) {
                    throw core::InputError(subject, "unknown activation '" + layer.activation + "'");
                }
                inputs = layer.outputs;
                model.layers.push_back(std::move(layer));
            }
            if (model.layers.empty() || inputs != 1) throw core::InputError(subject, "the last layer must have one output");
            file.models.push_back(std::move(model));
        }
    } catch (const nlohmann::json::exception& e) {
        throw core::InputError(subject, std::string("malformed table model: ") + e.what());
    }
    if (file.models.empty()) throw core::InputError(subject, "no models in the file");
    return file;
}

}  // namespace mmt::model
