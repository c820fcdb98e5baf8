#include "matmul_toolkit/collect/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace mmt::collect {

void update_rates(ProgressState& state, double elapsed_seconds, std::size_t configs_timed,
                  std::size_t problems_finished) {
    state.elapsed_seconds = elapsed_seconds;
    state.configs_timed = configs_timed;
    state.configs_per_second = elapsed_seconds > 0 ? static_cast<double>(configs_timed) / elapsed_seconds : 0.0;
    const std::size_t remaining = state.problems_total - state.problems_done;
    state.eta_seconds = problems_finished > 0
                            ? elapsed_seconds / static_cast<double>(problems_finished) * static_cast<double>(remaining)
                            : -1.0;
}

namespace {

std::string rate_and_eta(const ProgressState& s) {
    char text[96];
    std::snprintf(text, sizeof text, "%.1f configs/s, ETA %s", s.configs_per_second,
                  s.eta_seconds < 0 ? "?" : format_duration(s.eta_seconds).c_str());
    return text;
}

class SilentProgress final : public ProgressSink {};

class LogProgress final : public ProgressSink {
public:
    void on_start(const ProgressState& s) override {
        if (s.problems_resumed > 0) {
            spdlog::info("resuming: {} of {} problems are already in the output files",
                         s.problems_resumed, s.problems_total);
        }
        spdlog::info("collecting {} problems", s.problems_total - s.problems_resumed);
    }
    void on_problem_done(const ProgressState& s, const std::string& line) override {
        spdlog::info("[{}/{}] {} ({})", s.problems_done, s.problems_total, line, rate_and_eta(s));
    }
};

class BarProgress final : public ProgressSink {
public:
    void on_start(const ProgressState& s) override { draw(s, true); }
    void on_config(const ProgressState& s) override { draw(s, false); }
    void on_problem_done(const ProgressState& s, const std::string&) override { draw(s, true); }
    void on_finish(const ProgressState& s) override {
        draw(s, true);
        std::fputc('\n', stderr);
        std::fflush(stderr);
    }

private:
    void draw(const ProgressState& s, bool force) {
        const auto now = std::chrono::steady_clock::now();
        if (!force && now - m_last < std::chrono::milliseconds(100)) return;
        m_last = now;
        constexpr int kWidth = 28;
        const double fraction =
            s.problems_total == 0 ? 1.0 : static_cast<double>(s.problems_done) / static_cast<double>(s.problems_total);
        const int filled = static_cast<int>(std::floor(fraction * kWidth));
        std::string bar(static_cast<std::size_t>(filled), '=');
        if (filled < kWidth) bar += '>';
        bar.resize(kWidth, ' ');
        std::string current = s.current;
        if (current.size() > 40) current = current.substr(0, 39) + "~";
        // \r returns to the line start, \033[K clears what a longer previous line left.
        std::fprintf(stderr, "\r[%s] %zu/%zu problems  %s  %s\033[K", bar.c_str(), s.problems_done,
                     s.problems_total, rate_and_eta(s).c_str(), current.c_str());
        std::fflush(stderr);
    }

    std::chrono::steady_clock::time_point m_last{};
};

}  // namespace

std::string format_duration(double seconds) {
    const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
    const long long h = total / 3600, m = total % 3600 / 60, s = total % 60;
    char text[48];
    if (h > 0) {
        std::snprintf(text, sizeof text, "%lldh%02lldm", h, m);
    } else if (m > 0) {
        std::snprintf(text, sizeof text, "%lldm%02llds", m, s);
    } else {
        std::snprintf(text, sizeof text, "%llds", s);
    }
    return text;
}

std::unique_ptr<ProgressSink> make_silent_progress() { return std::make_unique<SilentProgress>(); }
std::unique_ptr<ProgressSink> make_log_progress() { return std::make_unique<LogProgress>(); }
std::unique_ptr<ProgressSink> make_bar_progress() { return std::make_unique<BarProgress>(); }

std::unique_ptr<ProgressSink> make_progress(bool quiet) {
    if (quiet) return make_silent_progress();
    if (::isatty(STDERR_FILENO)) return make_bar_progress();
    return make_log_progress();
}

}  // namespace mmt::collect
