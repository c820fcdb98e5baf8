#include "kernel_plan.hpp"

#include <exception>
#include <string>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::collect::cuda {

std::vector<KernelSpec> plan_kernel_specs(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for,
                                          const RunnableSpec& runnable, std::size_t max_specs) {
    std::vector<KernelSpec> specs;
    std::unordered_set<std::string> seen;
    for (const Problem& problem : problems) {
        if (specs.size() >= max_specs) break;
        try {
            for (const core::GemmConfig& config : configs_for(problem)) {
                std::optional<KernelSpec> spec = runnable(config, problem);
                if (!spec || !seen.insert(spec_key(*spec)).second) continue;
                specs.push_back(std::move(*spec));
                if (specs.size() >= max_specs) break;
            }
        } catch (const std::exception& e) {
            spdlog::debug("kernel plan: skipping {} {}: {}", problem.op_key(), core::shape_key(problem.shape),
                          e.what());
        }
    }
    return specs;
}

}  // namespace mmt::collect::cuda
