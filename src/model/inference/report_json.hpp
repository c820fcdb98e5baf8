#pragma once
// Private: the evaluation report as a JSON value, for files that embed it.

#include <nlohmann/json.hpp>

#include "matmul_toolkit/model/evaluator.hpp"

namespace mmt::model {

nlohmann::ordered_json report_json(const EvaluationReport& report);

}  // namespace mmt::model
