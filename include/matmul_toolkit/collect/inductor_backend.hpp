#pragma once
/// The Inductor backend: each problem is measured by a Python worker process
/// (`python3 -m matmul_toolkit_inductor.worker`, python/matmul_toolkit_inductor/) that runs
/// PyTorch Inductor's own Triton GEMM templates with the configs Inductor itself picks for
/// the shape (or exactly a solution file's), plus Inductor's ATen choice as the reference.
/// The protocol is docs/inductor_worker_protocol.md. This side owns problems, files,
/// resume and progress; a worker that dies or hangs is replaced and its problem failed.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "matmul_toolkit/collect/backend.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::collect {

namespace detail {
class ChildProcess;
}

/// The protocol version this binary speaks.
inline constexpr int kInductorProtocol = 1;

struct InductorBackendOptions {
    std::string python = "python3";     ///< interpreter that runs the worker (--python)
    std::filesystem::path package_dir;  ///< folder holding matmul_toolkit_inductor/; empty: find_inductor_package()
    int device_index = 0;               ///< CUDA device the worker measures on
    int worker_timeout_s = 900;         ///< --worker-timeout: longest one problem may take
    int hello_timeout_s = 120;          ///< longest the worker may take to start (import torch)
    /// Replaces `<python> -m matmul_toolkit_inductor.worker` (tests: a fake worker).
    std::vector<std::string> worker_command;
};

/// A problem as the worker protocol writes it: op, layout, B, M, N, K, dtype, alpha, beta.
core::OrderedJson problem_to_protocol(const Problem& problem);

/// The first folder holding matmul_toolkit_inductor/worker.py among: $MMT_INDUCTOR_PYTHONPATH,
/// <binary's folder>/python, <binary's folder>/../share/matmul_toolkit/python, the source
/// tree's python/. Empty when none does.
std::filesystem::path find_inductor_package();

/// True when `python` imports torch >= 2.9 and triton and sees a CUDA device (checked in a
/// child process, 60 s at most). `why`: the versions found, or what is missing.
bool inductor_python_usable(const std::string& python, std::string* why = nullptr);

class InductorBackend final : public Backend {
public:
    /// Starts the worker and reads its hello. Throws core::InputError("--backend",
    /// "inductor: <python>: ...") when the worker can't start or answers an error.
    explicit InductorBackend(InductorBackendOptions options);
    ~InductorBackend() override;

    std::string name() const override { return "inductor"; }
    std::string hardware_name() const override { return m_hardware; }
    /// int8: torch._int_mm and its Triton template (mm only).
    std::vector<std::string> supported_dtypes() const override {
        return {"float16", "bfloat16", "float32", "int8"};
    }
    std::vector<std::string> supported_ops() const override { return {"mm", "addmm", "bmm"}; }
    CollectionDefaults collection_defaults() const override;

    /// Keeps every config: Inductor filters its own.
    PruneResult prune(const std::vector<core::GemmConfig>& configs, const Problem& problem) const override;
    /// Only remembers the operand seed for the next measure_batch().
    void prepare(const Problem& problem, std::uint64_t seed) override;
    /// Throw: this backend measures whole problems (measure_batch).
    Timing time(const Problem& problem, const core::GemmConfig& config, const TimingOptions& options) override;
    Timing time_reference(const Problem& problem, const TimingOptions& options) override;
    double timed_kernel_seconds() const override { return m_timed_seconds; }

    bool measures_in_batches() const override { return true; }
    /// One `measure` request. Entry names: mm_config / addmm_config / bmm_config for
    /// Inductor's mm and bmm templates, <op>_persistent_tma_config for its persistent TMA
    /// template, reference_config() for ATen. Timing.median_ms is Inductor's time_ms (the
    /// minimum it ranks by); samples, min and max are its timed runs. Throws core::Error
    /// "worker died: ..." / "worker timed out after N s" (the worker is replaced, 3 times
    /// at most), "inductor worker: ..." for a problem the worker refused, core::Interrupted
    /// on Ctrl-C (the worker is killed).
    std::vector<BatchEntry> measure_batch(const Problem& problem, const std::vector<core::GemmConfig>& kept_configs,
                                          const std::string& own_space, bool with_reference,
                                          const TimingOptions& options) override;
    /// python_executable, and the python, torch and triton versions the worker reported.
    std::vector<std::pair<std::string, std::string>> environment() const override;
    /// "min": the dataset's time is Inductor's benchmarker's (the fastest of its runs).
    std::string statistic() const override { return "min"; }

    /// One `profile` request (docs/inductor_worker_protocol.md): `settings` gives out_dir and
    /// the profiler's steps; the problem and seed are added here. Returns the worker's reply;
    /// throws as measure_batch() does.
    core::OrderedJson profile(const Problem& problem, std::uint64_t seed, core::OrderedJson settings);

    /// Ends the worker process (a planning-only backend keeps what its hello said); the
    /// next measure_batch() starts a fresh one.
    void stop_worker();
    /// Workers started again after one died or hung.
    int restarts() const { return m_restarts; }

private:
    void start_worker();
    std::string worker_label() const;
    /// Sends `request` with the next id and returns the reply of its type; an "error"
    /// reply throws core::Error("inductor worker", ...); a dead, hung or garbled worker is
    /// replaced (replace_worker) and its problem fails.
    core::OrderedJson exchange(core::OrderedJson request, const Problem& problem);
    [[noreturn]] void replace_worker(const std::string& category, const std::string& what, const Problem& problem);

    InductorBackendOptions m_options;
    std::unique_ptr<detail::ChildProcess> m_worker;
    std::string m_hardware;
    std::vector<std::pair<std::string, std::string>> m_versions;
    std::uint64_t m_seed = 0;
    std::int64_t m_next_id = 1;
    int m_restarts = 0;
    double m_timed_seconds = 0.0;
};

/// Inductor's worker restarts per backend before measure_batch() gives up on the worker.
inline constexpr int kInductorMaxRestarts = 3;

}  // namespace mmt::collect
