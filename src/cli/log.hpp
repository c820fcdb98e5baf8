// The binary's log (spdlog), for the training subcommands in libmmt_train.so. Those compile
// against LibTorch, whose bundled fmt (fmt 12 in torch 2.x) comes first on their include path
// and shadows the fmt the system's spdlog was built with, so they cannot include spdlog; they
// format with printf_string and log through these functions, exported by the binary.
#pragma once

#include <string>

namespace mmt::cli {

void log_info(const std::string& message);
void log_warning(const std::string& message);

/// printf-style formatting into a string (the compiler checks the arguments).
std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

}  // namespace mmt::cli
