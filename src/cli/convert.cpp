// `convert`: JSON <-> msgpack for torch-diode files (datasets, shapesets, solutions).

#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
namespace {
namespace fs = std::filesystem;

struct ConvertOptions {
    std::vector<std::string> input_files;
    std::string output_dir;
    bool overwrite = false;
    std::string diode_layout;  ///< empty: keep each dataset's layout
    std::vector<std::string> file_extensions{"json", "msgpack"};

    void add_to(CLI::App& cmd) {
        cmd.add_option("--dataset", input_files,
                       "Files to convert (.json or .msgpack), or directories of them (required)");
        add_old_spelling(cmd, "--input-files", "--dataset", input_files);
        cmd.add_option("--output-dir", output_dir, "Directory the converted files are written to")
            ->required();
        cmd.add_flag("--overwrite", overwrite, "Replace output files that already exist");
        cmd.add_option("--diode-layout", diode_layout,
                       "Dataset layout to write: current or legacy (default: the input's layout)")
            ->check(CLI::IsMember({"current", "legacy"}));
        cmd.add_option("--file-extensions", file_extensions,
                       "Extensions of the files read from a directory")
            ->capture_default_str();
    }
};

struct Conversion {
    fs::path input;
    fs::path output;
};

// Every output is decided and checked before the first one is written, so a bad
// argument never leaves a half-converted directory behind.
std::vector<Conversion> plan(const ConvertOptions& options,
                             std::optional<core::FileFormat> format) {
    std::vector<fs::path> inputs;
    require_given(options.input_files, "--dataset");
    for (const auto& name : options.input_files) {
        std::error_code ec;
        if (fs::is_directory(name, ec)) {
            auto files = core::list_dataset_files(name, options.file_extensions);
            if (files.empty()) throw core::InputError(name, "no .json or .msgpack files in this directory");
            inputs.insert(inputs.end(), files.begin(), files.end());
        } else {
            if (!fs::exists(name, ec)) throw core::InputError(name, "no such file");
            inputs.emplace_back(name);
        }
    }
    std::set<fs::path> input_set;
    for (const auto& input : inputs) input_set.insert(fs::weakly_canonical(input));
    std::vector<Conversion> conversions;
    std::set<fs::path> outputs;
    for (const auto& input : inputs) {
        const auto input_format = core::format_from_extension(input);
        const auto output_format = format.value_or(
            input_format == core::FileFormat::json ? core::FileFormat::msgpack : core::FileFormat::json);
        auto output = fs::path(options.output_dir) / input.stem();
        output += core::extension_for(output_format);
        std::error_code ec;
        if (input_set.count(fs::weakly_canonical(output, ec)) > 0) {
            throw core::InputError(output.string(), "the output would replace an input file");
        }
        if (!outputs.insert(output.lexically_normal()).second) {
            throw core::InputError(output.string(), "two inputs would be written to this file");
        }
        if (!options.overwrite && fs::exists(output, ec)) {
            throw core::InputError(output.string(), "already exists (pass --overwrite to replace it)");
        }
        conversions.push_back({input, output});
    }
    return conversions;
}

int run_convert(const ConvertOptions& options, std::optional<core::FileFormat> format) {
    std::optional<core::DiodeLayout> layout;
    if (!options.diode_layout.empty()) layout = core::parse_diode_layout(options.diode_layout);
    for (const auto& c : plan(options, format)) {
        const auto kind = core::convert_file(c.input, c.output, layout);
        std::cout << c.input.string() << " -> " << c.output.string() << " ("
                  << core::file_kind_name(kind) << ")\n";
    }
    return core::kExitOk;
}

}  // namespace

void register_convert(CLI::App& app, const GlobalOptions& global) {
    auto options = std::make_shared<ConvertOptions>();
    auto* cmd = app.add_subcommand(
        "convert", "Convert torch-diode files between JSON and msgpack (the global --format "
                   "picks the output format; default: the other format than the input's)");
    options->add_to(*cmd);
    const CLI::Option* format_option = app.get_option("--format");
    cmd->callback([options, format_option, &global] {
        std::optional<core::FileFormat> format;
        if (format_option->count() > 0) format = core::parse_file_format(global.format);
        exit_code() = run_convert(*options, format);
    });
}

}  // namespace mmt::cli
