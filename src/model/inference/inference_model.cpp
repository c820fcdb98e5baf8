#include "matmul_toolkit/model/inference_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "checkpoint_reader.hpp"
#include "inference_model_impl.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"

namespace mmt::model {

InferenceModel::Impl::Impl(ModelInfo info_in, const FoldedNetwork& folded)
    : info(std::move(info_in)), dense(dense_net_of(folded)) {
    inv_std.resize(info.feature_std.size());
    for (std::size_t i = 0; i < inv_std.size(); ++i) inv_std[i] = 1.0f / info.feature_std[i];
}

void InferenceModel::Impl::standardise(float* rows, std::size_t count) const {
    const std::size_t width = inv_std.size();
    const float* mean = info.feature_mean.data();
    const float* scale = inv_std.data();
    for (std::size_t r = 0; r < count; ++r) {
        float* row = rows + r * width;
        for (std::size_t j = 0; j < width; ++j) row[j] = (row[j] - mean[j]) * scale[j];
    }
}

InferenceModel::InferenceModel() = default;
InferenceModel::InferenceModel(std::shared_ptr<const Impl> impl) : m_impl(std::move(impl)) {}

InferenceModel InferenceModel::load(const std::filesystem::path& path) {
    return from_bytes(core::read_file(path), path.string());
}

InferenceModel InferenceModel::from_bytes(std::string bytes, const std::string& where) {
    Checkpoint checkpoint = read_checkpoint_bytes(std::move(bytes), where);
    const FoldedNetwork folded = fold_network(checkpoint.info.spec, checkpoint.state);
    return InferenceModel(std::make_shared<const Impl>(std::move(checkpoint.info), folded));
}

const InferenceModel::Impl& InferenceModel::impl() const {
    if (!m_impl) throw core::Error("model", "no model loaded");
    return *m_impl;
}

const ModelInfo& InferenceModel::info() const { return impl().info; }

void InferenceModel::standardised_rows(const std::string& op_key, const core::MMShape& shape,
                                       const std::vector<core::GemmConfig>& configs, int parallel_units,
                                       std::vector<float>& rows) const {
    const auto& model = impl();
    const ProblemFeatures problem(op_key, shape, parallel_units > 0 ? parallel_units : model.info.parallel_units);
    const std::size_t width = num_features();
    rows.resize(configs.size() * width);
    for (std::size_t i = 0; i < configs.size(); ++i) problem.write(configs[i], rows.data() + i * width);
    model.standardise(rows.data(), configs.size());
}

void InferenceModel::standardised_rows(const std::vector<PredictionQuery>& queries, std::vector<float>& rows) const {
    const auto& model = impl();
    const std::size_t width = num_features();
    rows.resize(queries.size() * width);
    for (std::size_t i = 0; i < queries.size(); ++i) {
        const auto& q = queries[i];
        ProblemFeatures(q.op_key, q.shape, q.parallel_units > 0 ? q.parallel_units : model.info.parallel_units)
            .write(q.config, rows.data() + i * width);
    }
    model.standardise(rows.data(), queries.size());
}

std::vector<double> InferenceModel::forward(const float* rows, std::size_t count) const {
    const auto& model = impl();
    std::vector<double> out(count);
    if (count == 0) return out;
    // Reused per thread: fresh buffers would cost a page fault per page on every call.
    thread_local DenseScratch scratch;
    thread_local std::vector<float> values;
    values.resize(count);
    model.dense.forward(rows, count, values.data(), scratch);
    std::copy(values.begin(), values.end(), out.begin());
    return out;
}

std::vector<double> InferenceModel::predict_log_ms(const std::string& op_key, const core::MMShape& shape,
                                                   const std::vector<core::GemmConfig>& configs,
                                                   int parallel_units) const {
    thread_local std::vector<float> rows;  // reused: see forward()
    standardised_rows(op_key, shape, configs, parallel_units, rows);
    return forward(rows.data(), configs.size());
}

std::vector<double> InferenceModel::predict_ms(const std::string& op_key, const core::MMShape& shape,
                                               const std::vector<core::GemmConfig>& configs,
                                               int parallel_units) const {
    auto values = predict_log_ms(op_key, shape, configs, parallel_units);
    for (auto& v : values) v = std::exp(v);
    return values;
}

std::vector<double> InferenceModel::predict_log_ms(const std::vector<PredictionQuery>& queries) const {
    std::vector<float> rows;
    standardised_rows(queries, rows);
    return forward(rows.data(), queries.size());
}

std::vector<std::size_t> InferenceModel::rank(const std::string& op_key, const core::MMShape& shape,
                                              const std::vector<core::GemmConfig>& configs,
                                              int parallel_units) const {
    const auto predicted = predict_log_ms(op_key, shape, configs, parallel_units);
    std::vector<std::size_t> order(configs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return predicted[a] < predicted[b]; });
    return order;
}

}  // namespace mmt::model
