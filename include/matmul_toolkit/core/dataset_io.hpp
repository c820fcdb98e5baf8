#pragma once
/// Reading and writing torch-diode-compatible files: datasets (both layouts), shapesets
/// and max-autotune solutions, as JSON or msgpack. Every reader throws InputError naming
/// the file and the field; every writer writes a temporary file, then renames it.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "matmul_toolkit/core/dataset.hpp"
#include "matmul_toolkit/core/json_codec.hpp"

namespace mmt::core {

enum class FileFormat { json, msgpack };

/// torch-diode's two dataset layouts: `current` (config objects, what its loader reads
/// today) and `legacy` (configs as JSON strings, "name" in operation and solution).
enum class DiodeLayout { current, legacy };

/// The format a path's extension names (".json" / ".msgpack"); throws InputError otherwise.
FileFormat format_from_extension(const std::filesystem::path& path);
FileFormat parse_file_format(const std::string& name);       ///< "json" | "msgpack"
DiodeLayout parse_diode_layout(const std::string& name);     ///< "current" | "legacy"
std::string extension_for(FileFormat format);                ///< ".json" | ".msgpack"

/// Reads a dataset in either layout and either format (chosen by the extension). Missing
/// optional fields take torch-diode's defaults; unknown fields, wrong types, non-positive
/// dimensions, unknown dtypes or ops throw InputError("<file>", "<field path>: <what>").
/// Times are milliseconds; an integer time is read as a number (and written back as a float).
Dataset load_dataset(const std::filesystem::path& path);
/// Same, and reports the layout found (legacy when any config is a JSON string or an
/// operation / solution carries "name").
Dataset load_dataset(const std::filesystem::path& path, DiodeLayout& layout_found);

/// Builds a dataset from a parsed document; `subject` (the file) names errors.
Dataset dataset_from_document(const OrderedJson& document, const std::string& subject,
                              DiodeLayout* layout_found = nullptr);
/// The document torch-diode's Dataset.to_dict() would produce (keys sorted per object).
OrderedJson dataset_to_document(const Dataset& dataset, DiodeLayout layout = DiodeLayout::current);

/// The dataset files a directory holds: regular files whose extension is listed (with or
/// without the dot), excluding "*.meta.json" sidecars, sorted by path.
std::vector<std::filesystem::path> list_dataset_files(const std::filesystem::path& dir,
                                                      const std::vector<std::string>& extensions);

/// Reads every file under `dir` whose extension is listed (e.g. {"json", "msgpack"}),
/// in sorted path order, and merges them.
Dataset load_dataset_dir(const std::filesystem::path& dir,
                         const std::vector<std::string>& extensions);

/// A file or a directory, whichever `path` is.
Dataset load_dataset_any(const std::filesystem::path& path,
                         const std::vector<std::string>& extensions = {"json", "msgpack"});

/// Writes a dataset; the format follows the extension. Atomic (temporary file + rename).
void save_dataset(const Dataset& dataset, const std::filesystem::path& path,
                  DiodeLayout layout = DiodeLayout::current);

/// The JSON text torch-diode's json.dumps(indent=2) would write for the dataset.
std::string dataset_to_json(const Dataset& dataset, DiodeLayout layout = DiodeLayout::current);

/// A config as torch-diode's to_dict() writes it: keys sorted, "version" last.
OrderedJson config_to_document(const GemmConfig& config);
/// A shape as torch-diode's str(MMShape) orders it: version, B, M, M_dtype, N, K, ...
OrderedJson shape_to_document(const MMShape& shape);
/// A shape object (shape_to_document's, a shapeset's) with the readers' checks; throws
/// InputError(subject, "<where>: <what>") on a missing or wrong field.
MMShape shape_from_document(const OrderedJson& value, const std::string& subject, const std::string& where);

/// The shape key torch-diode uses: str(MMShape), keys in its field order.
std::string shape_key(const MMShape& shape);
/// Parses a shape key back; throws InputError with `context` on a malformed key.
MMShape parse_shape_key(const std::string& key, const std::string& context);

/// Reads {"operations": {OP: {"shapes": [shape objects]}}} (torch-diode's OperationShapeSet).
OperationShapeSet load_shapeset(const std::filesystem::path& path);
/// Writes a shapeset as OperationShapeSet.serialize() does (shape keys in MMShape order).
void save_shapeset(const OperationShapeSet& shapeset, const std::filesystem::path& path);

/// Reads {"config": [...]} (one list for every op) or {OP: {"config": [...]}}.
Solution load_solution(const std::filesystem::path& path);
/// Writes the flat or the per-op form, whichever the solution holds, each list with "version": 1.
void save_solution(const Solution& solution, const std::filesystem::path& path);

/// What a torch-diode file holds, judged by its top-level keys.
enum class FileKind { dataset, shapeset, solution };
std::string file_kind_name(FileKind kind);  ///< "dataset" | "shapeset" | "solution"

/// Reads any JSON or msgpack file (format from the extension) into a document.
OrderedJson load_document(const std::filesystem::path& path);
/// Writes a document as json.dumps(indent=2) or msgpack (format from the extension), atomically.
void save_document(const OrderedJson& document, const std::filesystem::path& path);

/// Converts a dataset, shapeset or solution file to the format `output`'s extension names,
/// after validating it. The document is carried over as is (same layout, same key order)
/// unless `layout` asks for a dataset layout. A "<input>.meta.json" sidecar is copied to
/// "<output>.meta.json". Returns what the file held.
FileKind convert_file(const std::filesystem::path& input, const std::filesystem::path& output,
                      std::optional<DiodeLayout> layout = std::nullopt);

/// Writes `content` to `path` through a temporary file beside it and a rename, so a
/// reader never sees a half-written file. Throws InputError naming the path on failure.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

/// Removes the temporary files that writers of `path` killed mid-write left beside it
/// ("<path>.tmp<pid>_<n>" of processes gone). write_file_atomically calls it; a run that
/// resumes from files it will not write again (a finished chunk, its sidecar) calls it too.
void remove_stale_temp_files(const std::filesystem::path& path);

/// Throws InputError ("<path>: is read-only; not overwriting it") when `path` exists and is
/// read-only: write_file_atomically refuses it, and long work checks it before it starts.
void check_not_read_only(const std::filesystem::path& path);

/// Reads a whole file; throws InputError naming the path when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

}  // namespace mmt::core
