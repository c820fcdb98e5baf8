// `profile`: a grid of matmuls (sizes x precisions x layouts x batch sizes), each run under a
// profiler into a folder of its own (config_0001/, ...): PyTorch profiler (Kineto) traces and
// a Chakra execution trace through the Inductor worker, or the Chrome trace of this binary's
// own timed runs with the native CUDA or CPU backend.

#include <iostream>

#include <spdlog/spdlog.h>

#include "collect_options.hpp"
#include "command.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/inductor_backend.hpp"
#include "matmul_toolkit/collect/interrupt.hpp"
#include "matmul_toolkit/collect/profile_grid.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {

struct ProfileCliOptions {
    std::string output_dir = "profile";
    bool size_search = false, precision_search = false, layout_search = false, batch_search = false;
    bool rectangular = false;
    std::vector<std::int64_t> sizes;
    std::vector<std::string> dtypes;
    std::vector<std::string> layouts;
    std::vector<std::int64_t> batch_sizes;
    collect::ProfileSteps steps;
    std::string backend;
    std::string python = "python3";
    int worker_timeout_s = 900;
    std::string inductor_worker;

    void add_to(CLI::App& cmd) {
        cmd.add_option("--output-dir", output_dir, "Folder of the experiments (config_0001/, ...) and profile_summary.csv; "
                                                   "a run resumes after the experiments finished there")
            ->capture_default_str();
        cmd.add_flag("--size-search", size_search, "Sizes 256 512 1024 2048 4096 (default: 1024)");
        cmd.add_flag("--precision-search", precision_search,
                     "Precisions float32 float16 bfloat16 int8 (default: bfloat16 on a GPU, float32 on the CPU)");
        cmd.add_flag("--layout-search", layout_search, "Layouts nn nt tn tt, transposing A and/or B (default: nn)");
        cmd.add_flag("--batch-search", batch_search, "Batch sizes 1 2 4 8 16, bmm above 1 (default: 1, mm)");
        cmd.add_flag("--rectangular", rectangular, "Every (M, N, K) of the sizes instead of M = N = K");
        cmd.add_option("--sizes", sizes, "Sizes instead of the default or --size-search's");
        cmd.add_option("--dtypes", dtypes, "Precisions instead of the default or --precision-search's");
        cmd.add_option("--layouts", layouts, "Layouts instead of the default or --layout-search's");
        cmd.add_option("--batch-sizes", batch_sizes, "Batch sizes instead of the default or --batch-search's");
        cmd.add_option("--wait", steps.wait, "Profiler schedule: idle steps per cycle")->capture_default_str();
        cmd.add_option("--warmup", steps.warmup, "Profiler schedule: warm-up steps per cycle (not traced)")
            ->capture_default_str();
        cmd.add_option("--active", steps.active, "Profiler schedule: traced steps per cycle")->capture_default_str();
        cmd.add_option("--repeat", steps.repeat, "Profiler schedule: cycles")->capture_default_str();
        cmd.add_option("--backend", backend,
                       "inductor (torch.profiler in the Python worker: Kineto and execution traces), native (the "
                       "built-in CUDA backend) or cpu; default as for collect")
            ->check(CLI::IsMember({"cpu", "native", "inductor"}));
        cmd.add_option("--python", python, "Python interpreter that runs the inductor backend's worker")
            ->capture_default_str();
        cmd.add_option("--worker-timeout", worker_timeout_s, "Inductor backend: seconds one experiment may take")
            ->capture_default_str();
        cmd.add_option("--inductor-worker", inductor_worker, "Inductor worker command line (tests)")->group("");
    }
};

collect::ProfileAxes axes_for(const ProfileCliOptions& o, bool on_gpu) {
    collect::ProfileAxes axes;
    axes.rectangular = o.rectangular;
    axes.sizes = !o.sizes.empty() ? o.sizes : o.size_search ? collect::profile_search_sizes() : axes.sizes;
    axes.dtypes = !o.dtypes.empty()     ? o.dtypes
                  : o.precision_search ? collect::profile_search_dtypes()
                                       : std::vector<std::string>{on_gpu ? "bfloat16" : "float32"};
    axes.layouts = !o.layouts.empty() ? o.layouts : o.layout_search ? collect::profile_search_layouts() : axes.layouts;
    axes.batch_sizes = !o.batch_sizes.empty() ? o.batch_sizes
                       : o.batch_search       ? collect::profile_search_batch_sizes()
                                              : axes.batch_sizes;
    return axes;
}

int run_profile_command(const ProfileCliOptions& o, const GlobalOptions& global) {
    const collect::BackendSelection selection = collect::select_backend(o.backend, global.device, o.python);
    const auto experiments = collect::profile_grid(axes_for(o, selection.device == "cuda"));
    collect::ProfileRunOptions options;
    options.output_dir = o.output_dir;
    options.steps = o.steps;
    options.seed = global.seed;
    if (o.steps.wait < 0 || o.steps.warmup < 0) throw core::InputError("--wait", "--wait and --warmup must be >= 0");
    if (o.steps.active < 1) throw core::InputError("--active", "must be at least 1");
    if (o.steps.repeat < 1) throw core::InputError("--repeat", "must be at least 1");

    std::unique_ptr<collect::InductorBackend> inductor;
    std::unique_ptr<collect::Backend> native;
    std::unique_ptr<collect::ExperimentRunner> runner;
    if (selection.backend == "inductor") {
        inductor = std::make_unique<collect::InductorBackend>(
            to_inductor_options(o.python, o.worker_timeout_s, o.inductor_worker, 0));
        runner = collect::make_inductor_runner(*inductor);
    } else {
        native = collect::make_backend(selection.device);
        runner = collect::make_backend_runner(*native);
    }
    spdlog::info("backend: {} ({}); {} experiment{} on {} into {}", selection.backend, selection.reason,
                 experiments.size(), experiments.size() == 1 ? "" : "s", runner->hardware_name(), o.output_dir);

    collect::InterruptHandlerScope interrupt_handler;
    const collect::ProfileSummary summary = collect::run_profile(experiments, options, *runner);
    std::cout << "profile: " << summary.done << " done, " << summary.skipped << " skipped, " << summary.failed
              << " failed, " << summary.resumed << " finished earlier, of " << experiments.size()
              << " experiments; summary: " << summary.summary_csv.string() << "\n";
    if (summary.interrupted) throw core::Interrupted("interrupted; finished experiments are kept, run again to resume");
    return summary.failed > 0 ? core::kExitFailure : core::kExitOk;
}

}  // namespace

void register_profile(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ProfileCliOptions>();
    auto* cmd = app.add_subcommand(
        "profile",
        "Profile a grid of matmuls (--size-search, --precision-search, --layout-search, --batch-search, --rectangular) "
        "into one folder per experiment: PyTorch profiler (Kineto) and Chakra execution traces with --backend "
        "inductor, the Chrome trace of the timed runs with native / cpu; resumes where it stopped");
    options->add_to(*cmd);
    cmd->callback([options, &global] { exit_code() = run_profile_command(*options, global); });
}

}  // namespace mmt::cli
