#pragma once
// Private to src/collect: the writer the engine and the worker pool share, so a collection
// measured in worker processes lands in the same files, chunks and sidecars as one run
// in process.

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/dataset_collector.hpp"
#include "matmul_toolkit/collect/engine.hpp"
#include "matmul_toolkit/collect/output_files.hpp"
#include "matmul_toolkit/collect/progress.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::collect {

// Mid-chunk checkpoints rewrite the whole file; past this share of the run's time spent
// saving they wait for the chunk's end, so huge unchunked files don't dominate the run.
inline constexpr double kMaxSaveShare = 0.1;

// The file a run is writing now (the whole output, or the current chunk), its sidecar, and
// everything already written.
class OutputWriter {
    using Clock = std::chrono::steady_clock;
public:
    OutputWriter(const CollectOptions& options, const CollectionPlan& plan, std::string hardware,
                 core::OrderedJson run_meta)
        : m_output(plan.output),
          m_chunk_size(options.chunk_size.value_or(0)),
          m_layout(options.layout),
          m_hardware(std::move(hardware)),
          m_run_meta(std::move(run_meta)),
          m_current(std::make_unique<DatasetCollector>(m_hardware)) {}

    // Loads what earlier runs wrote; returns everything in those files.
    core::Dataset resume() {
        core::Dataset all;
        if (m_output.empty()) return all;
        std::vector<std::filesystem::path> files;
        if (m_chunk_size > 0) {
            files = existing_chunks(m_output);
        } else if (std::filesystem::is_regular_file(m_output)) {
            files.push_back(m_output);
        }
        std::size_t last_file_problems = 0;
        for (const auto& file : files) {
            core::Dataset data;
            try {
                data = core::load_dataset(file);
            } catch (const core::InputError& e) {
                throw core::InputError(file.string(), "cannot resume from this file (" + e.detail() +
                                                          "); move it away to start afresh");
            }
            check_same_measurement(file);
            // A run killed while saving this file's sidecar left its temporary file, and a
            // finished chunk is not written again.
            core::remove_stale_temp_files(file);
            core::remove_stale_temp_files(core::meta_sidecar_path(file));
            last_file_problems = data.num_problems();
            all.merge(data);
            m_files.push_back(file);
        }
        if (m_chunk_size > 0) {
            m_chunk_index = static_cast<int>(files.size());
            if (!files.empty() && last_file_problems < static_cast<std::size_t>(m_chunk_size)) {
                open_file(files.back());
            } else {
                open_file(chunk_path(m_output, ++m_chunk_index));
            }
        } else {
            open_file(m_output);
        }
        return all;
    }

    void add(const ProblemResult& result, const core::OrderedJson& problem_meta) {
        m_current->add_problem(result.op, result.shape, result.timed_configs);
        m_meta["problems"][core::meta_problem_key(m_hardware, result.op, result.shape)] = problem_meta;
        m_dirty = true;
    }

    // Saves when the chunk is full (and starts the next), or when a checkpoint is cheap
    // enough; `elapsed` is the run's time so far.
    void checkpoint(double elapsed) {
        if (m_output.empty()) return;
        const bool chunk_full =
            m_chunk_size > 0 && m_current->get_dataset().num_problems() >= static_cast<std::size_t>(m_chunk_size);
        if (chunk_full || m_save_seconds <= kMaxSaveShare * elapsed) save();
        if (chunk_full) open_file(chunk_path(m_output, ++m_chunk_index));
    }

    void save() {
        if (m_output.empty() || !m_dirty) return;
        const auto start = Clock::now();
        // The sidecar first: a run killed between the two writes leaves the dataset as it
        // was, and the problems it lacks are measured again; never a dataset whose newest
        // problems have no record in the sidecar.
        core::save_meta_sidecar(m_path, m_meta);
        m_current->save_to_file(m_path, m_layout);
        if (std::find(m_files.begin(), m_files.end(), m_path) == m_files.end()) m_files.push_back(m_path);
        m_dirty = false;
        m_save_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }

    const std::vector<std::filesystem::path>& files() const { return m_files; }
    const core::Dataset& in_memory() const { return m_current->get_dataset(); }

private:
    // A resumed file must hold times taken the same way as this run's: the sidecar's run
    // settings that decide a time (backend, GPU, space, timing) must match. A file without a
    // sidecar, or a setting only one side records, is taken as it is, except the inductor
    // backend's timing method: files timed before it was recorded differ from today's.
    void check_same_measurement(const std::filesystem::path& file) const {
        const auto meta = core::load_meta_sidecar(file);
        if (!meta.contains("run") || !meta["run"].is_object()) return;
        const auto& old_run = meta["run"];
        for (const char* key : {"backend", "hardware", "search_mode", "search_space", "configs_file", "allow_tf32",
                                "warmup", "repeat", "statistic"}) {
            if (old_run.contains(key) && m_run_meta.contains(key) && old_run[key] != m_run_meta[key]) {
                throw core::InputError(file.string(), std::string("was collected with ") + key + " " +
                                                          old_run[key].dump() + ", this run has " +
                                                          m_run_meta[key].dump() +
                                                          "; choose another --output or move the file away");
            }
        }
        const std::string old_timing = core::inductor_timing_method(old_run),
                          new_timing = core::inductor_timing_method(m_run_meta);
        if (m_run_meta.value("backend", std::string()) == "inductor" && old_timing != new_timing) {
            // Empty only where the file's run names no backend (an Inductor run without a
            // timing field is "Inductor's benchmarker").
            const std::string old_method =
                old_timing.empty() ? "a method it does not record" : "\"" + old_timing + "\"";
            throw core::InputError(file.string(), "was timed by " + old_method + ", this run by \"" + new_timing +
                                                      "\"; choose another --output or move the file away");
        }
    }

    void open_file(const std::filesystem::path& path) {
        m_path = path;
        m_current = std::make_unique<DatasetCollector>(m_hardware);
        if (std::filesystem::exists(path)) m_current->load_from_file(path);
        m_meta = std::filesystem::exists(path) ? core::load_meta_sidecar(path) : core::OrderedJson::object();
        m_meta["tool"] = {{"name", "matmul_toolkit"}, {"version", MMT_VERSION_STRING}};
        m_meta["run"] = m_run_meta;
        if (!m_meta.contains("problems")) m_meta["problems"] = core::OrderedJson::object();
        m_dirty = false;
    }

    std::filesystem::path m_output;
    int m_chunk_size;
    core::DiodeLayout m_layout;
    std::string m_hardware;
    core::OrderedJson m_run_meta;
    std::unique_ptr<DatasetCollector> m_current;
    std::filesystem::path m_path;
    core::OrderedJson m_meta = core::OrderedJson::object();
    int m_chunk_index = 0;
    bool m_dirty = false;
    double m_save_seconds = 0.0;
    std::vector<std::filesystem::path> m_files;
};

// What run_collection and the worker pool set up before measuring: the checked plan, the
// summary's header, the writer with earlier runs' files loaded, the problems still to
// measure (indices into plan.problems, in order) and the progress state to start from.
struct CollectionStart {
    CollectionPlan plan;
    CollectionSummary summary;
    std::unique_ptr<OutputWriter> writer;
    std::vector<std::size_t> pending;
    ProgressState progress;
};

inline CollectionStart start_collection(const CollectOptions& options, const Backend& backend) {
    CollectionStart s;
    s.plan = plan_collection(options, backend);
    s.summary.backend = backend.name();
    s.summary.hardware = backend.hardware_name();
    s.summary.problems_planned = s.plan.problems.size();
    s.writer = std::make_unique<OutputWriter>(options, s.plan, s.summary.hardware,
                                              run_metadata(options, s.plan, backend));
    const core::Dataset existing = s.writer->resume();
    for (std::size_t i = 0; i < s.plan.problems.size(); ++i) {
        const auto& p = s.plan.problems[i];
        if (existing.contains(s.summary.hardware, p.op_key(), p.shape)) {
            ++s.summary.problems_resumed;
        } else {
            s.pending.push_back(i);
        }
    }
    s.progress.problems_total = s.plan.problems.size();
    s.progress.problems_resumed = s.summary.problems_resumed;
    s.progress.problems_done = s.summary.problems_resumed;
    return s;
}

// Saves, and fills the summary's files, dataset and wall time.
inline void complete_summary(CollectionStart& s, double wall_seconds) {
    s.writer->save();
    s.summary.files = s.writer->files();
    if (s.plan.output.empty()) {
        s.summary.dataset = s.writer->in_memory();
    } else {
        for (const auto& file : s.summary.files) s.summary.dataset.merge(core::load_dataset(file));
    }
    s.summary.wall_seconds = wall_seconds;
}

// After the last problem: complete_summary(), then CollectionInterrupted when the run was
// interrupted.
inline void finish_collection(CollectionStart& s, double wall_seconds) {
    complete_summary(s, wall_seconds);
    if (s.summary.interrupted) {
        const std::string where =
            s.summary.files.empty() ? "nothing was saved" : "saved to " + s.summary.files.back().string();
        throw CollectionInterrupted("interrupted: " + std::to_string(s.summary.problems_collected) +
                                        " problems collected this run, " + where +
                                        "; run the same command again to resume",
                                    std::move(s.summary));
    }
}

}  // namespace mmt::collect
