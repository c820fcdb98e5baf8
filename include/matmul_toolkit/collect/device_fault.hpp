#pragma once
/// Device faults: errors after which a backend's device context is unusable (on CUDA the
/// sticky errors, e.g. an illegal address; CUDA's documentation says the process must be
/// restarted). A backend throws DeviceFault; the engine stops using that backend, and
/// `collect` (which measures CUDA in worker processes) records the config as failed,
/// restarts the worker and resumes the problem without that config.
///
/// Test-only switch MMT_TEST_FAULT_CONFIG: configs matching it fault on purpose (the CPU
/// backend throws DeviceFault, the CUDA kernel writes through an illegal address), so
/// tests can prove the recovery. Never set it for real collections.

#include <cstdlib>
#include <sstream>
#include <string>

#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::collect {

/// The device context is unusable after this error; nothing more can run in this process.
class DeviceFault : public core::Error {
public:
    using core::Error::Error;
};

/// The name of the test-only environment variable.
inline constexpr const char* kTestFaultVariable = "MMT_TEST_FAULT_CONFIG";

/// True when `pattern` ("BMxBNxBK", optionally followed by gG, sS, wW tokens separated by
/// '_' or spaces, e.g. "64x64x32_s2_w4") names `config`; the tokens given must all match.
inline bool fault_pattern_matches(const std::string& pattern, const core::GemmConfig& config) {
    std::string text = pattern;
    for (char& c : text) {
        if (c == '_') c = ' ';
    }
    std::istringstream tokens(text);
    std::string token;
    bool any = false;
    while (tokens >> token) {
        const bool first = !any;
        any = true;
        if (first) {
            const std::string blocks = std::to_string(config.block_m) + "x" + std::to_string(config.block_n) + "x" +
                                       std::to_string(config.block_k);
            if (token != blocks) return false;
            continue;
        }
        const char field = token[0];
        const std::string value = token.substr(1);
        const int actual = field == 'g' ? config.group_m : field == 's' ? config.num_stages
                                                         : field == 'w' ? config.num_warps : -1;
        if (actual < 0 || value != std::to_string(actual)) return false;
    }
    return any;
}

/// True when MMT_TEST_FAULT_CONFIG is set and names `config` (reference entries never fault).
inline bool test_fault_requested(const core::GemmConfig& config) {
    const char* pattern = std::getenv(kTestFaultVariable);
    return pattern != nullptr && *pattern != '\0' && config.block_m > 0 && fault_pattern_matches(pattern, config);
}

}  // namespace mmt::collect
