#include "matmul_toolkit/collect/dataset_merge.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <unordered_map>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/collect/config_space.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace fs = std::filesystem;

namespace mmt::collect {
namespace {

struct Entry {
    std::string hardware;
    std::string op;
    core::MMShape shape;
    core::TimedConfig first;
    std::vector<double> times_ms;
};

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string entry_key(const std::string& hardware, const std::string& op, const core::MMShape& shape,
                      const core::GemmConfig& config) {
    // '\n' appears in none of the parts, so the key is unambiguous.
    return hardware + "\n" + op + "\n" + core::shape_key(shape) + "\n" +
           core::python_json_dumps_sorted(core::config_to_document(config));
}

std::string squeezed_lower(const std::string& name) {
    std::string out;
    for (const char c : name) {
        if (!std::isspace(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

fs::path comparable(const fs::path& path) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(path, ec);
    return ec ? path.lexically_normal() : canonical;
}

}  // namespace

std::vector<fs::path> expand_merge_inputs(const std::vector<fs::path>& inputs, const fs::path& output,
                                          std::vector<fs::path>* skipped) {
    if (inputs.empty()) throw core::InputError("--dataset", "no datasets to merge (required)");
    const fs::path out = output.empty() ? fs::path() : comparable(output);
    std::vector<fs::path> files;
    std::vector<fs::path> seen;
    auto add = [&](const fs::path& file) {
        const fs::path key = comparable(file);
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
        seen.push_back(key);
        files.push_back(file);
    };
    for (const auto& input : inputs) {
        std::error_code ec;
        if (fs::is_directory(input, ec)) {
            const auto listed = core::list_dataset_files(input, {"json", "msgpack"});
            std::size_t taken = 0;
            for (const auto& file : listed) {
                if (!out.empty() && comparable(file) == out) {
                    if (skipped != nullptr) skipped->push_back(file);
                    continue;
                }
                add(file);
                ++taken;
            }
            if (taken == 0) throw core::InputError(input.string(), "no .json or .msgpack dataset files in this directory");
        } else if (fs::exists(input, ec)) {
            if (!out.empty() && comparable(input) == out) {
                throw core::InputError(input.string(), "is also the --output of this merge");
            }
            add(input);
        } else {
            throw core::InputError(input.string(), "no such file or directory");
        }
    }
    return files;
}

MergeResult merge_datasets(const std::vector<core::Dataset>& datasets, const std::vector<fs::path>& sources) {
    MergeResult result;
    std::vector<Entry> entries;
    std::unordered_map<std::string, std::size_t> index;
    std::map<std::string, std::vector<fs::path>> files_of_hardware;
    std::vector<std::string> hardware_order;

    for (std::size_t d = 0; d < datasets.size(); ++d) {
        const fs::path source = d < sources.size() ? sources[d] : fs::path();
        if (!source.empty()) result.summary.files.push_back(source);
        for (const auto& hw : datasets[d].hardware()) {
            auto& files = files_of_hardware[hw.name];
            if (files.empty() && std::find(hardware_order.begin(), hardware_order.end(), hw.name) == hardware_order.end()) {
                hardware_order.push_back(hw.name);
            }
            if (!source.empty() && std::find(files.begin(), files.end(), source) == files.end()) files.push_back(source);
            for (const auto& op : hw.operations) {
                for (const auto& problem : op.problems) {
                    for (const auto& tc : problem.timed_configs) {
                        ++result.summary.entries_read;
                        const auto key = entry_key(hw.name, op.name, problem.shape, tc.config);
                        const auto [it, inserted] = index.emplace(key, entries.size());
                        if (inserted) entries.push_back({hw.name, op.name, problem.shape, tc, {}});
                        entries[it->second].times_ms.push_back(tc.time_ms);
                    }
                }
            }
        }
    }

    std::map<std::string, std::size_t> problems_of_hardware, entries_of_hardware;
    for (const auto& e : entries) {
        core::TimedConfig merged = e.first;
        merged.time_ms = median(e.times_ms);
        if (!result.dataset.contains(e.hardware, e.op, e.shape)) ++problems_of_hardware[e.hardware];
        result.dataset.add_timing(e.hardware, e.op, e.shape, merged);
        ++entries_of_hardware[e.hardware];
        if (e.times_ms.size() > 1) {
            ++result.summary.entries_combined;
            result.combined[core::meta_problem_key(e.hardware, e.op, e.shape)][describe_config(e.first.config)] = {
                {"samples", e.times_ms.size()}, {"statistic", "median"}, {"times_ms", e.times_ms}};
        }
    }
    result.summary.entries_written = entries.size();
    for (const auto& name : hardware_order) {
        result.summary.hardware.push_back(
            {name, problems_of_hardware[name], entries_of_hardware[name], files_of_hardware[name]});
    }
    for (std::size_t i = 0; i < hardware_order.size(); ++i) {
        for (std::size_t j = i + 1; j < hardware_order.size(); ++j) {
            if (squeezed_lower(hardware_order[i]) == squeezed_lower(hardware_order[j])) {
                result.summary.similar_hardware.emplace_back(hardware_order[i], hardware_order[j]);
            }
        }
    }
    return result;
}

MergeResult merge_dataset_files(const std::vector<fs::path>& files) {
    std::vector<core::Dataset> datasets;
    datasets.reserve(files.size());
    for (const auto& file : files) datasets.push_back(core::load_dataset(file));
    return merge_datasets(datasets, files);
}

void save_merge(const MergeResult& result, const fs::path& output) {
    core::save_dataset(result.dataset, output, core::DiodeLayout::current);
    core::OrderedJson meta = core::OrderedJson::object();
    meta["tool"] = {{"name", "matmul_toolkit"}, {"version", MMT_VERSION_STRING}};
    core::OrderedJson inputs = core::OrderedJson::array();
    for (const auto& file : result.summary.files) inputs.push_back(file.string());
    meta["merge"] = {{"inputs", inputs},
                     {"entries_read", result.summary.entries_read},
                     {"entries_written", result.summary.entries_written},
                     {"entries_combined", result.summary.entries_combined},
                     {"statistic", "median"}};
    meta["problems"] = result.combined;
    core::save_meta_sidecar(output, meta);
}

std::string format_merge_summary(const MergeSummary& s) {
    std::ostringstream out;
    out << "Merge summary\n";
    out << "  inputs: " << s.files.size() << " files\n";
    for (const auto& file : s.skipped) out << "  skipped: " << file.string() << " (the output itself)\n";
    out << "  entries: " << s.entries_read << " read, " << s.entries_written << " written, "
        << s.entries_combined << " combined from several timings (median kept), "
        << (s.entries_read - s.entries_written) << " duplicate timings folded\n";
    out << "  hardware: " << s.hardware.size()
        << (s.hardware.size() > 1 ? " (kept apart: entries of different hardware are never combined)\n" : "\n");
    for (const auto& hw : s.hardware) {
        out << "    " << hw.name << ": " << hw.problems << " problems, " << hw.entries << " entries, from "
            << hw.files.size() << " files\n";
    }
    for (const auto& [a, b] : s.similar_hardware) {
        out << "  warning: hardware names '" << a << "' and '" << b
            << "' differ only in case or spacing; they are kept apart\n";
    }
    return out.str();
}

}  // namespace mmt::collect
