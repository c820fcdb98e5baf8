// Using the collection library from another C++ program: time the DEFAULT configs on a
// few problems with a DatasetCollector, save the dataset and its table, read them back.
//
//     dataset_collector_example [OUTPUT_DIR] [cpu|cuda]

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/engine.hpp"

int main(int argc, char** argv) {
    namespace collect = mmt::collect;
    const std::filesystem::path out_dir = argc > 1 ? argv[1] : ".";
    const std::string device = argc > 2 ? argv[2] : "cpu";
    try {
        const auto backend = collect::make_backend(device);
        std::printf("measuring on %s (%s)\n", backend->hardware_name().c_str(), backend->name().c_str());

        collect::CollectOptions options;
        options.generator.num_shapes = 4;
        options.generator.sizes.min_size = 32;
        options.max_size = 128;
        options.generator.ops = {"mm", "addmm", "bmm"};
        options.warmup = 1;
        options.repeat = 3;

        collect::DatasetCollector collector(backend->hardware_name());
        {
            // Like torch-diode's `with collector:`: whatever is measured inside is recorded.
            collect::CollectionScope scope(collector);
            collect::run_collection(options, *backend);
        }

        std::filesystem::create_directories(out_dir);
        const auto dataset_file = out_dir / "collector_dataset.json";
        const auto table_file = out_dir / "collector_table.json";
        collector.save_to_file(dataset_file);
        collector.save_table_to_file(table_file);
        std::printf("saved %zu problems to %s and their table to %s\n",
                    collector.get_dataset().num_problems(), dataset_file.c_str(), table_file.c_str());

        collect::DatasetCollector reloaded(backend->hardware_name());
        reloaded.load_from_file(dataset_file);
        for (const auto& entry : reloaded.to_table()) {
            const auto& best = entry.sorted_configs.front();
            std::printf("%-6s M=%-4lld N=%-4lld K=%-4lld fastest %-22s %.4f ms of %zu entries\n",
                        entry.op.c_str(), static_cast<long long>(entry.shape.M),
                        static_cast<long long>(entry.shape.N), static_cast<long long>(entry.shape.K),
                        collect::describe_config(best.config).c_str(), best.time_ms,
                        entry.sorted_configs.size());
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
