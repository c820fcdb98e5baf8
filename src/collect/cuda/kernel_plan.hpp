#pragma once
/// Which kernels a collection will need, worked out before it times anything, so the
/// compile workers can build them ahead of the GPU (a cold-cache collection is otherwise
/// compile-bound: each new problem brings new alignment / EVEN_K specialisations).

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "kernel_spec.hpp"
#include "matmul_toolkit/collect/backend.hpp"

namespace mmt::collect::cuda {

/// The spec a backend would build for a config on a problem, or nullopt when it prunes it.
using RunnableSpec = std::function<std::optional<KernelSpec>(const core::GemmConfig&, const Problem&)>;

/// The distinct kernels (by spec_key) that timing `configs_for(problem)` on each problem
/// needs, runnable ones only, in the order the collection first uses them (problem order,
/// then config order), at most `max_specs` of them. A problem whose specs cannot be worked
/// out (it throws) is skipped: planning is advisory, the collection reports the error.
std::vector<KernelSpec> plan_kernel_specs(const std::vector<Problem>& problems, const ConfigsForProblem& configs_for,
                                          const RunnableSpec& runnable, std::size_t max_specs);

}  // namespace mmt::collect::cuda
