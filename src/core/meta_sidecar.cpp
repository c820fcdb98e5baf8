#include "matmul_toolkit/core/meta_sidecar.hpp"

#include <map>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {

std::filesystem::path meta_sidecar_path(const std::filesystem::path& dataset_path) {
    auto path = dataset_path;
    path += ".meta.json";
    return path;
}

OrderedJson load_meta_sidecar(const std::filesystem::path& dataset_path) {
    const auto path = meta_sidecar_path(dataset_path);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return OrderedJson::object();
    auto meta = parse_json_text(read_file(path), path.string());
    if (!meta.is_object()) {
        throw InputError(path.string(), "expected an object at the top level, got " +
                                            json_type_name(meta));
    }
    return meta;
}

void save_meta_sidecar(const std::filesystem::path& dataset_path, const OrderedJson& meta) {
    write_file_atomically(meta_sidecar_path(dataset_path), python_json_dumps(meta, 2) + "\n");
}

void merge_meta_sidecar(const std::filesystem::path& dataset_path, const OrderedJson& patch) {
    auto meta = load_meta_sidecar(dataset_path);
    merge_json_objects(meta, patch);
    save_meta_sidecar(dataset_path, meta);
}

std::string inductor_timing_method(const OrderedJson& run) {
    if (!run.is_object()) return "";
    if (run.contains("environment") && run["environment"].is_object() && run["environment"].contains("timing")) {
        const auto& timing = run["environment"]["timing"];
        return timing.is_string() ? timing.get<std::string>() : timing.dump();
    }
    return run.value("backend", std::string()) == "inductor" ? "Inductor's benchmarker" : "";
}

std::string mixed_timing_warning(const std::vector<std::filesystem::path>& files) {
    std::map<std::string, std::vector<std::string>> by_method;
    for (const auto& file : files) {
        OrderedJson meta;
        try {
            meta = load_meta_sidecar(file);
        } catch (const InputError&) {
            continue;  // an unreadable sidecar says nothing of the method; the data may still be fine
        }
        if (!meta.contains("run")) continue;
        const std::string method = inductor_timing_method(meta["run"]);
        if (!method.empty()) by_method[method].push_back(file.string());
    }
    if (by_method.size() < 2) return "";
    std::string line = "the datasets were timed different ways (their sidecars' run.environment.timing):";
    for (const auto& [method, names] : by_method) {
        line += " \"" + method + "\":";
        for (const auto& name : names) line += " " + name;
        line += ";";
    }
    line.back() = '.';
    return line;
}

void merge_json_objects(OrderedJson& target, const OrderedJson& patch) {
    if (!target.is_object() || !patch.is_object()) {
        target = patch;
        return;
    }
    for (auto it = patch.begin(); it != patch.end(); ++it) {
        auto existing = target.find(it.key());
        if (existing != target.end() && existing->is_object() && it->is_object()) {
            merge_json_objects(*existing, *it);
        } else {
            target[it.key()] = *it;
        }
    }
}

std::string meta_problem_key(const std::string& hardware, const std::string& op,
                             const MMShape& shape) {
    return hardware + "|" + op + "|" + shape_key(shape);
}

}  // namespace mmt::core
