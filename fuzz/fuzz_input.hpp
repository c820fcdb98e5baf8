#pragma once
// Shared by the fuzz targets: the loaders read files (the format follows the extension),
// so each input is written to a per-process scratch file first. A loader may accept the
// input or throw core::InputError; any other exception breaks the loaders' contract and
// aborts, so libFuzzer reports it with the input.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::fuzz {

inline std::filesystem::path scratch_file(const std::string& extension) {
    const auto dir = std::filesystem::temp_directory_path() / ("mmt_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / ("input" + extension);
}

template <typename Load>
int run_loader(const std::uint8_t* data, std::size_t size, const std::string& extension, Load load) {
    static const auto path = scratch_file(extension);
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    // MMT_FUZZ_VERBOSE=1 prints each input's outcome (to triage a corpus with -runs=0).
    static const bool verbose = std::getenv("MMT_FUZZ_VERBOSE") != nullptr;
    try {
        load(path);
        if (verbose) std::fprintf(stderr, "loaded\n");
    } catch (const core::InputError& e) {
        // The expected answer to bad input.
        if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "loader threw something other than InputError: %s\n", e.what());
        std::abort();
    }
    return 0;
}

}  // namespace mmt::fuzz
