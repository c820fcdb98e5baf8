// The evaluator's two entry points that predict with a Predictor (LibTorch: on the training
// device); the metrics themselves are the inference library's (inference/evaluator.cpp).

#include <map>
#include <string>
#include <vector>

#include "matmul_toolkit/model/evaluator.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/predictor.hpp"

namespace mmt::model {

std::vector<std::vector<double>> predict_problems(const Predictor& predictor,
                                                  const std::vector<ProblemGroup>& problems) {
    std::map<std::string, int> units;
    std::vector<std::vector<double>> predicted;
    predicted.reserve(problems.size());
    for (const auto& problem : problems) {
        auto it = units.find(problem.hardware);
        if (it == units.end()) it = units.emplace(problem.hardware, lookup_hardware(problem.hardware).parallel_units).first;
        std::vector<core::GemmConfig> configs;
        configs.reserve(problem.timings.size());
        for (const auto& t : problem.timings) configs.push_back(t.config);
        predicted.push_back(predictor.predict_log_ms(problem.op_key, problem.shape, configs, it->second));
    }
    return predicted;
}

EvaluationReport evaluate_model(const Predictor& predictor, const std::vector<ProblemGroup>& problems,
                                std::size_t top_n_worst) {
    return evaluate_predictions(problems, predict_problems(predictor, problems), top_n_worst);
}

}  // namespace mmt::model
