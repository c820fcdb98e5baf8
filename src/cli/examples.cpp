#include "examples.hpp"

#include <iostream>

#include "matmul_toolkit/collect/backend_factory.hpp"

namespace mmt::cli {

std::unique_ptr<collect::Backend> example_backend(const GlobalOptions& global) {
    auto backend = collect::make_backend(resolved_device(global));
    std::cout << "measuring on " << backend->hardware_name() << " (" << backend->name() << " backend; --device "
              << "picks cpu or cuda)\n";
    return backend;
}

collect::CollectOptions example_collection(int num_shapes, std::int64_t max_size, std::uint64_t seed) {
    collect::CollectOptions options;
    options.generator.num_shapes = num_shapes;
    options.generator.sizes.min_size = 32;
    options.generator.sizes.log_normal = true;
    options.generator.ops = {"mm", "addmm", "bmm"};
    options.max_size = max_size;
    options.warmup = 1;
    options.repeat = 3;
    options.seed = seed;
    return options;
}

void explain(int step, const std::string& text) { std::cout << "\n" << step << ". " << text << "\n"; }

}  // namespace mmt::cli
