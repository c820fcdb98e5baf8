#pragma once
/// Progress of a collection: a bar on stderr when it is a terminal, plain log lines when
/// it is not, nothing with --quiet.

#include <cstddef>
#include <memory>
#include <string>

namespace mmt::collect {

/// Where a collection stands.
struct ProgressState {
    std::size_t problems_done = 0;     ///< finished this run, plus those resumed from files
    std::size_t problems_total = 0;
    std::size_t problems_resumed = 0;  ///< found in existing output files and skipped
    std::size_t configs_timed = 0;     ///< this run
    double elapsed_seconds = 0.0;      ///< this run
    double configs_per_second = 0.0;
    double eta_seconds = -1.0;         ///< negative while unknown
    std::string current;               ///< the problem in flight
};

/// Sets the elapsed time, configs timed, configs/s and the ETA (from the mean time of the
/// `problems_finished` problems this run has finished; unknown before the first).
void update_rates(ProgressState& state, double elapsed_seconds, std::size_t configs_timed,
                  std::size_t problems_finished);

class ProgressSink {
public:
    virtual ~ProgressSink() = default;
    virtual void on_start(const ProgressState& /*state*/) {}
    /// After every timed config (sinks rate-limit their own drawing).
    virtual void on_config(const ProgressState& /*state*/) {}
    /// After a problem; `line` says what it gave.
    virtual void on_problem_done(const ProgressState& /*state*/, const std::string& /*line*/) {}
    virtual void on_finish(const ProgressState& /*state*/) {}
};

/// "1h02m", "3m05s", "12s"
std::string format_duration(double seconds);

/// A sink that draws nothing.
std::unique_ptr<ProgressSink> make_silent_progress();
/// One log line per problem (spdlog info).
std::unique_ptr<ProgressSink> make_log_progress();
/// A bar redrawn in place on stderr.
std::unique_ptr<ProgressSink> make_bar_progress();
/// --quiet: silent; stderr a terminal: bar; else log lines.
std::unique_ptr<ProgressSink> make_progress(bool quiet);

}  // namespace mmt::collect
