#pragma once
// Private to the CLI: what the three example subcommands (collector-example,
// collector-basic-example, model-example) share: the backend they measure on and the
// small collection they run, so each reads as the steps it explains.

#include <memory>
#include <string>

#include "command.hpp"
#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/collect/engine.hpp"

namespace mmt::cli {

/// The backend for --device (CPU without a GPU), with a line saying which.
std::unique_ptr<collect::Backend> example_backend(const GlobalOptions& global);

/// A small log-normal collection (sizes 32 to max_size, mm / addmm / bmm, DEFAULT space,
/// 1 warm-up and 3 timed runs) of `num_shapes` problems, kept in memory.
collect::CollectOptions example_collection(int num_shapes, std::int64_t max_size, std::uint64_t seed);

/// Prints a numbered step of an example: "\n<step>. <text>".
void explain(int step, const std::string& text);

}  // namespace mmt::cli
