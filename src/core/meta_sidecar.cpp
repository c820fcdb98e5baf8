#include "matmul_toolkit/core/meta_sidecar.hpp"

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
