#include "matmul_toolkit/collect/output_files.hpp"

#include <unistd.h>

#include <fstream>
#include <system_error>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace fs = std::filesystem;

namespace mmt::collect {

fs::path resolve_output_path(const fs::path& output, const std::string& format) {
    if (output.empty()) throw core::InputError("--output", "the output path is empty");
    if (!output.has_extension()) {
        fs::path with_extension = output;
        with_extension += core::extension_for(core::parse_file_format(format));
        return with_extension;
    }
    try {
        core::format_from_extension(output);
    } catch (const core::InputError&) {
        throw core::InputError("--output", output.string() +
                                               ": unknown extension (expected .json or .msgpack)");
    }
    return output;
}

fs::path chunk_path(const fs::path& output, int index) {
    fs::path chunk = output.parent_path() /
                     (output.stem().string() + "_" + std::to_string(index) + output.extension().string());
    return chunk;
}

std::vector<fs::path> existing_chunks(const fs::path& output) {
    std::vector<fs::path> chunks;
    for (int i = 1;; ++i) {
        fs::path p = chunk_path(output, i);
        std::error_code ec;
        if (!fs::is_regular_file(p, ec)) break;
        chunks.push_back(std::move(p));
    }
    return chunks;
}

void check_writable_directory(const fs::path& dir_in, const std::string& option) {
    const fs::path dir = dir_in.empty() ? fs::path(".") : dir_in;
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
        fs::create_directories(dir, ec);
        if (ec) {
            throw core::InputError(option, "cannot create directory " + dir.string() + ": " + ec.message());
        }
    }
    if (!fs::is_directory(dir, ec)) {
        throw core::InputError(option, dir.string() + " is not a directory");
    }
    const fs::path probe = dir / (".mmt_write_probe_" + std::to_string(::getpid()));
    bool written = false;
    {
        std::ofstream out(probe);
        written = out && (out << "probe") && out.flush();
    }
    fs::remove(probe, ec);
    if (!written) throw core::InputError(option, "cannot write to directory " + dir.string());
}

}  // namespace mmt::collect
