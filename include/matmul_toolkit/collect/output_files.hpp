#pragma once
/// Where a collection writes: the output path, torch-diode's chunk names and the checks
/// made before any work starts.

#include <filesystem>
#include <string>
#include <vector>

namespace mmt::collect {

/// `output` itself when it names a format (.json / .msgpack); with no extension, `output`
/// plus the extension of `format` ("json" | "msgpack"). Throws InputError("--output", ...)
/// on any other extension.
std::filesystem::path resolve_output_path(const std::filesystem::path& output,
                                          const std::string& format);

/// torch-diode's chunk name: "data.json" -> "data_3.json" for index 3.
std::filesystem::path chunk_path(const std::filesystem::path& output, int index);

/// The chunk files that exist: OUTPUT_1, OUTPUT_2, ... up to the first missing one.
std::vector<std::filesystem::path> existing_chunks(const std::filesystem::path& output);

/// Creates the parent directory when missing and writes and removes a probe file there,
/// so an unwritable output fails before any work. Throws InputError(option, ...).
void check_writable_directory(const std::filesystem::path& dir, const std::string& option);

}  // namespace mmt::collect
