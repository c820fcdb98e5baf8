#include "log.hpp"

#include <cstdarg>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace mmt::cli {

void log_info(const std::string& message) { spdlog::info("{}", message); }

void log_warning(const std::string& message) { spdlog::warn("{}", message); }

std::string printf_string(const char* format, ...) {
    va_list args;
    va_start(args, format);
    va_list sizing;
    va_copy(sizing, args);
    const int length = std::vsnprintf(nullptr, 0, format, sizing);
    va_end(sizing);
    std::string text(length > 0 ? static_cast<std::size_t>(length) : 0, '\0');
    if (length > 0) std::vsnprintf(text.data(), text.size() + 1, format, args);
    va_end(args);
    return text;
}

}  // namespace mmt::cli
