// `collect-worker` (hidden): one worker process of `collect --devices`. It measures the
// problems its parent sends on stdin and answers on stdout; people never run it.

#include <iostream>
#include <memory>

#include "command.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/worker_pool.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {

void register_collect_worker(CLI::App& app, const GlobalOptions& global) {
    auto device_index = std::make_shared<int>(0);
    auto compile_threads = std::make_shared<int>(0);
    auto* cmd = app.add_subcommand("collect-worker", "Worker process of collect --devices (internal)");
    cmd->group("");  // hidden from --help
    cmd->add_option("--device-index", *device_index, "Device this worker measures on")->required();
    cmd->add_option("--compile-threads", *compile_threads, "NVRTC processes of this worker (0: cores - 1)");
    cmd->callback([device_index, compile_threads, &global] {
        const auto backend = collect::make_backend(resolved_device(global), *device_index, *compile_threads);
        // After a device fault the worker has answered and ends; its parent starts a new one.
        const bool faulted = collect::serve_worker(*backend, std::cin, std::cout);
        exit_code() = faulted ? core::kExitFailure : core::kExitOk;
    });
}

}  // namespace mmt::cli
