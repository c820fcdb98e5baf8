// `collect-worker` (hidden): one worker process of `collect --devices`. It measures the
// problems its parent sends on stdin and answers on stdout; people never run it.

#include <iostream>
#include <memory>

#include "collect_options.hpp"
#include "command.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/collect/worker_pool.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct CollectWorkerOptions {
    int device_index = 0;
    int compile_threads = 0;
    std::string backend;  ///< "inductor", or empty: --device's backend
    std::string python = "python3";
    int worker_timeout_s = 900;
    std::string inductor_worker;
};

}  // namespace

void register_collect_worker(CLI::App& app, const GlobalOptions& global) {
    auto o = std::make_shared<CollectWorkerOptions>();
    auto* cmd = app.add_subcommand("collect-worker", "Worker process of collect --devices (internal)");
    cmd->group("");  // hidden from --help
    cmd->add_option("--device-index", o->device_index, "Device this worker measures on")->required();
    cmd->add_option("--compile-threads", o->compile_threads, "NVRTC processes of this worker (0: cores - 1)");
    cmd->add_option("--backend", o->backend, "inductor, or unset for --device's backend");
    cmd->add_option("--python", o->python, "Inductor worker's interpreter");
    cmd->add_option("--worker-timeout", o->worker_timeout_s, "Inductor worker's time per problem");
    cmd->add_option("--inductor-worker", o->inductor_worker, "Inductor worker command line (tests)");
    cmd->callback([o, &global] {
        std::unique_ptr<collect::Backend> backend;
        if (o->backend == "inductor") {
            backend = std::make_unique<collect::InductorBackend>(
                to_inductor_options(o->python, o->worker_timeout_s, o->inductor_worker, o->device_index));
        } else {
            backend = collect::make_backend(resolved_device(global), o->device_index, o->compile_threads);
        }
        // After a device fault the worker has answered and ends; its parent starts a new one.
        const bool faulted = collect::serve_worker(*backend, std::cin, std::cout);
        exit_code() = faulted ? core::kExitFailure : core::kExitOk;
    });
}

}  // namespace mmt::cli
