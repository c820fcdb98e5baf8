#pragma once
/// The sidecar of a dataset file, "<file>.meta.json": whatever we record that torch-diode's
/// layout has no room for (its loader rejects unknown keys). torch-diode never reads it.
///
/// Layout (a convention; every key is optional, readers must tolerate missing ones):
///   {
///     "tool":     {"name": "matmul_toolkit", "version": "0.1.0"},
///     "run":      {"warmup": 5, "repeat": 20, "search": "exhaustive", "seed": 42, ...},
///     "problems": {"<hardware>|<op>|<shape key>": {"<config name or key>": {...}, ...}}
///   }
/// Writers merge what they know with merge_meta_sidecar (objects merge key by key, other
/// values are replaced), so several writers and resumed runs add to the same file.

#include <filesystem>
#include <string>
#include <vector>

#include "matmul_toolkit/core/json_codec.hpp"
#include "matmul_toolkit/core/types.hpp"

namespace mmt::core {

/// "<dataset file>.meta.json".
std::filesystem::path meta_sidecar_path(const std::filesystem::path& dataset_path);

/// The sidecar of a dataset file; an empty object when there is none. Throws InputError
/// when it exists but is not a JSON object.
OrderedJson load_meta_sidecar(const std::filesystem::path& dataset_path);

/// Replaces the sidecar (json.dumps(indent=2) text, written atomically).
void save_meta_sidecar(const std::filesystem::path& dataset_path, const OrderedJson& meta);

/// Loads the sidecar, merges `patch` into it and writes it back.
void merge_meta_sidecar(const std::filesystem::path& dataset_path, const OrderedJson& patch);

/// Merges `patch` into `target`: objects key by key (recursively), anything else replaced.
void merge_json_objects(OrderedJson& target, const OrderedJson& patch);

/// How the Inductor backend timed a file, from its sidecar's "run" object: run.environment.timing,
/// "Inductor's benchmarker" for an Inductor run from before the worker named its method, ""
/// for another backend.
std::string inductor_timing_method(const OrderedJson& run);

/// One line naming the files of each method when the Inductor backend timed `files` more
/// than one way (their times then measure different things: padded or not, launch timed or
/// not), else "". Files without a (readable) sidecar or of another backend are left out.
std::string mixed_timing_warning(const std::vector<std::filesystem::path>& files);

/// The key of one problem under "problems": "<hardware>|<op>|<shape key>".
std::string meta_problem_key(const std::string& hardware, const std::string& op,
                             const MMShape& shape);

}  // namespace mmt::core
