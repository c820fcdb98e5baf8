#include "matmul_toolkit/core/dataset_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::core {
namespace fs = std::filesystem;
namespace {

constexpr int kJsonIndent = 2;
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();

const char* const kConfigKeys[] = {"ACC_TYPE",  "ALLOW_TF32", "EVEN_K",  "USE_FAST_ACCUM",
                                   "block_k",   "block_m",    "block_n", "grid",
                                   "group_m",   "name",       "num_stages", "num_warps",
                                   "version"};
const char* const kShapeKeys[] = {"version", "B",         "M",        "M_dtype",   "N",
                                  "K",       "K_dtype",   "out_dtype", "out_size", "out_stride"};

// Validates a parsed document and names the offending field: every failure becomes
// InputError(file, "<where>: <what>"), where <where> reads like
// "hardware 'H100' > operation 'mm' > solution[3] > timed_configs[0] > time".
class DocumentReader {
public:
    explicit DocumentReader(std::string subject) : m_subject(std::move(subject)) {}

    const std::string& subject() const { return m_subject; }

    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        throw InputError(m_subject, where.empty() ? what : where + ": " + what);
    }

    static std::string child(const std::string& where, const std::string& name) {
        return where.empty() ? name : where + " > " + name;
    }

    static std::string quoted(const std::string& label, const std::string& name) {
        return label + " '" + name + "'";
    }

    static std::string indexed(const std::string& label, std::size_t index) {
        return label + "[" + std::to_string(index) + "]";
    }

    const OrderedJson& object(const OrderedJson& value, const std::string& where) const {
        if (!value.is_object()) fail(where, "expected an object, got " + json_type_name(value));
        return value;
    }

    const OrderedJson& array(const OrderedJson& value, const std::string& where) const {
        if (!value.is_array()) fail(where, "expected a list, got " + json_type_name(value));
        return value;
    }

    void check_keys(const OrderedJson& object, const std::string& where,
                    std::initializer_list<const char*> allowed) const {
        for (auto it = object.begin(); it != object.end(); ++it) {
            const bool known = std::any_of(allowed.begin(), allowed.end(),
                                           [&](const char* key) { return it.key() == key; });
            if (!known) fail(where, "unknown field '" + it.key() + "'");
        }
    }

    template <std::size_t N>
    void check_keys(const OrderedJson& object, const std::string& where,
                    const char* const (&allowed)[N]) const {
        for (auto it = object.begin(); it != object.end(); ++it) {
            const bool known = std::any_of(std::begin(allowed), std::end(allowed),
                                           [&](const char* key) { return it.key() == key; });
            if (!known) fail(where, "unknown field '" + it.key() + "'");
        }
    }

    static const OrderedJson* optional(const OrderedJson& object, const char* key) {
        const auto it = object.find(key);
        return it == object.end() ? nullptr : &*it;
    }

    const OrderedJson& required(const OrderedJson& object, const char* key,
                                const std::string& where) const {
        const auto it = object.find(key);
        if (it == object.end()) fail(where, std::string("missing field '") + key + "'");
        return *it;
    }

    std::int64_t integer(const OrderedJson& value, const std::string& where, std::int64_t min,
                         std::int64_t max) const {
        std::int64_t result = 0;
        if (value.is_number_unsigned()) {
            const auto u = value.get<std::uint64_t>();
            if (u > static_cast<std::uint64_t>(max)) {
                fail(where, "must be at most " + std::to_string(max) + ", got " + std::to_string(u));
            }
            result = static_cast<std::int64_t>(u);
        } else if (value.is_number_integer()) {
            result = value.get<std::int64_t>();
        } else {
            fail(where, "expected an integer, got " + json_type_name(value));
        }
        if (result < min) {
            fail(where, min == 1 ? "must be positive, got " + std::to_string(result)
                                 : "must be at least " + std::to_string(min) + ", got " +
                                       std::to_string(result));
        }
        if (result > max) {
            fail(where, "must be at most " + std::to_string(max) + ", got " + std::to_string(result));
        }
        return result;
    }

    int small_int(const OrderedJson& value, const std::string& where, std::int64_t min) const {
        return static_cast<int>(integer(value, where, min, kIntMax));
    }

    double number(const OrderedJson& value, const std::string& where) const {
        if (!value.is_number()) fail(where, "expected a number, got " + json_type_name(value));
        return value.get<double>();
    }

    bool boolean(const OrderedJson& value, const std::string& where) const {
        if (!value.is_boolean()) fail(where, "expected true or false, got " + json_type_name(value));
        return value.get<bool>();
    }

    std::string string(const OrderedJson& value, const std::string& where) const {
        if (!value.is_string()) fail(where, "expected a string, got " + json_type_name(value));
        return value.get<std::string>();
    }

    std::string dtype(const OrderedJson& value, const std::string& where) const {
        auto name = string(value, where);
        if (!is_known_dtype(name)) {
            std::string known;
            for (const auto& d : known_dtypes()) known += (known.empty() ? "" : ", ") + d;
            fail(where, "unknown dtype '" + name + "' (known: " + known + ")");
        }
        return name;
    }

    std::array<std::int64_t, 3> triple(const OrderedJson& value, const std::string& where,
                                       std::int64_t min) const {
        array(value, where);
        if (value.size() != 3) {
            fail(where, "expected 3 integers, got a list of " + std::to_string(value.size()));
        }
        std::array<std::int64_t, 3> out{};
        for (std::size_t i = 0; i < 3; ++i) {
            out[i] = integer(value[i], indexed(where, i), min, kInt64Max);
        }
        return out;
    }

    void check_op(const std::string& op, const std::string& where) const {
        try {
            parse_op_key(op);
        } catch (const InputError&) {
            fail(where, "unknown operation '" + op +
                            "' (expected mm, addmm or bmm, optionally followed by _nt, _tn or _tt)");
        }
    }

    MMShape shape(const OrderedJson& value, const std::string& where) const {
        object(value, where);
        check_keys(value, where, kShapeKeys);
        MMShape s;
        if (const auto* v = optional(value, "version")) {
            s.version = version(*v, child(where, "version"));
        }
        s.B = integer(required(value, "B", where), child(where, "B"), 1, kInt64Max);
        s.M = integer(required(value, "M", where), child(where, "M"), 1, kInt64Max);
        s.N = integer(required(value, "N", where), child(where, "N"), 1, kInt64Max);
        s.K = integer(required(value, "K", where), child(where, "K"), 1, kInt64Max);
        s.M_dtype = dtype(required(value, "M_dtype", where), child(where, "M_dtype"));
        s.K_dtype = dtype(required(value, "K_dtype", where), child(where, "K_dtype"));
        s.out_dtype = dtype(required(value, "out_dtype", where), child(where, "out_dtype"));
        s.out_size = triple(required(value, "out_size", where), child(where, "out_size"), 1);
        s.out_stride = triple(required(value, "out_stride", where), child(where, "out_stride"), 0);
        return s;
    }

    MMShape shape_key(const std::string& key, const std::string& where) const {
        OrderedJson parsed;
        try {
            parsed = OrderedJson::parse(key);
        } catch (const OrderedJson::exception&) {
            fail(where, "shape key is not a JSON object: '" + key + "'");
        }
        return shape(parsed, where);
    }

    // A config object, or (legacy layout) a JSON string holding one.
    GemmConfig config(const OrderedJson& value, const std::string& where, bool* was_string) const {
        if (value.is_string()) {
            if (was_string) *was_string = true;
            OrderedJson parsed;
            try {
                parsed = OrderedJson::parse(value.get_ref<const std::string&>());
            } catch (const OrderedJson::exception&) {
                fail(where, "config string is not valid JSON");
            }
            return config_object(parsed, where);
        }
        if (!value.is_object()) {
            fail(where, "expected an object (or a JSON string of one), got " + json_type_name(value));
        }
        return config_object(value, where);
    }

    GemmConfig config_object(const OrderedJson& value, const std::string& where) const {
        object(value, where);
        check_keys(value, where, kConfigKeys);
        GemmConfig c;
        c.name = string(required(value, "name", where), child(where, "name"));
        c.grid = integer(required(value, "grid", where), child(where, "grid"), kInt64Min, kInt64Max);
        c.block_m = small_int(required(value, "block_m", where), child(where, "block_m"), 1);
        c.block_n = small_int(required(value, "block_n", where), child(where, "block_n"), 1);
        c.block_k = small_int(required(value, "block_k", where), child(where, "block_k"), 1);
        c.group_m = small_int(required(value, "group_m", where), child(where, "group_m"), 1);
        c.num_stages = small_int(required(value, "num_stages", where), child(where, "num_stages"), 1);
        c.num_warps = small_int(required(value, "num_warps", where), child(where, "num_warps"), 1);
        if (const auto* v = optional(value, "EVEN_K")) c.even_k = boolean(*v, child(where, "EVEN_K"));
        if (const auto* v = optional(value, "ALLOW_TF32")) {
            c.allow_tf32 = boolean(*v, child(where, "ALLOW_TF32"));
        }
        if (const auto* v = optional(value, "USE_FAST_ACCUM")) {
            c.use_fast_accum = boolean(*v, child(where, "USE_FAST_ACCUM"));
        }
        if (const auto* v = optional(value, "ACC_TYPE")) c.acc_type = string(*v, child(where, "ACC_TYPE"));
        if (const auto* v = optional(value, "version")) c.version = version(*v, child(where, "version"));
        return c;
    }

    int version(const OrderedJson& value, const std::string& where) const {
        return static_cast<int>(integer(value, where, std::numeric_limits<int>::min(), kIntMax));
    }

    void optional_version(const OrderedJson& object, const std::string& where) const {
        if (const auto* v = optional(object, "version")) version(*v, child(where, "version"));
    }

private:
    std::string m_subject;
};

std::string normalized_extension(const std::string& extension) {
    if (extension.empty() || extension[0] == '.') return extension;
    return "." + extension;
}

bool ends_with(const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() &&
           text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string encode(const OrderedJson& document, FileFormat format) {
    return format == FileFormat::json ? python_json_dumps(document, kJsonIndent)
                                      : to_msgpack_bytes(document);
}

FileKind detect_kind(const OrderedJson& document, const std::string& subject) {
    if (!document.is_object()) {
        throw InputError(subject, "expected an object at the top level, got " +
                                      json_type_name(document));
    }
    if (document.contains("hardware")) return FileKind::dataset;
    if (document.contains("operations")) return FileKind::shapeset;
    if (!document.empty()) return FileKind::solution;
    throw InputError(subject, "empty object: not a torch-diode dataset, shapeset or solution");
}

OperationShapeSet shapeset_from_document(const OrderedJson& document, const std::string& subject) {
    const DocumentReader r(subject);
    r.object(document, "");
    r.check_keys(document, "", {"operations", "version"});
    const auto& operations = r.object(r.required(document, "operations", ""), "operations");
    OperationShapeSet shapeset;
    for (auto op = operations.begin(); op != operations.end(); ++op) {
        const auto where = DocumentReader::quoted("operation", op.key());
        r.check_op(op.key(), where);
        r.object(op.value(), where);
        r.check_keys(op.value(), where, {"shapes", "version"});
        const auto shapes_where = DocumentReader::child(where, "shapes");
        const auto& shapes = r.array(r.required(op.value(), "shapes", where), shapes_where);
        if (shapes.empty()) shapeset.operations.push_back({op.key(), {}});
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            shapeset.add_shape(op.key(), r.shape(shapes[i], DocumentReader::indexed(shapes_where, i)));
        }
    }
    return shapeset;
}

std::vector<GemmConfig> config_list(const DocumentReader& r, const OrderedJson& object,
                                    const std::string& where) {
    r.object(object, where);
    r.check_keys(object, where, {"config", "version"});
    r.optional_version(object, where);
    const auto list_where = DocumentReader::child(where, "config");
    const auto& list = r.array(r.required(object, "config", where), list_where);
    std::vector<GemmConfig> configs;
    configs.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
        configs.push_back(r.config_object(list[i], DocumentReader::indexed(list_where, i)));
    }
    return configs;
}

Solution solution_from_document(const OrderedJson& document, const std::string& subject) {
    const DocumentReader r(subject);
    r.object(document, "");
    if (document.empty()) {
        r.fail("", "expected {\"config\": [...]} or {OP: {\"config\": [...]}}, got an empty object");
    }
    Solution solution;
    const auto* flat = DocumentReader::optional(document, "config");
    if (flat != nullptr && flat->is_array()) {
        solution.configs = config_list(r, document, "");
        return solution;
    }
    for (auto op = document.begin(); op != document.end(); ++op) {
        solution.per_op.emplace_back(op.key(),
                                     config_list(r, op.value(), DocumentReader::quoted("operation", op.key())));
    }
    return solution;
}

OrderedJson config_list_document(const std::vector<GemmConfig>& configs) {
    OrderedJson out = OrderedJson::object();
    out["config"] = OrderedJson::array();
    for (const auto& c : configs) out["config"].push_back(config_to_document(c));
    out["version"] = 1;
    return out;
}

OrderedJson solution_to_document(const Solution& solution) {
    if (!solution.is_per_op()) return config_list_document(solution.configs);
    OrderedJson out = OrderedJson::object();
    for (const auto& [op, configs] : solution.per_op) out[op] = config_list_document(configs);
    return out;
}

OrderedJson shapeset_to_document(const OperationShapeSet& shapeset) {
    OrderedJson operations = OrderedJson::object();
    for (const auto& entry : shapeset.operations) {
        OrderedJson shapes = OrderedJson::array();
        for (const auto& s : entry.shapes) shapes.push_back(shape_to_document(s));
        operations[entry.op] = OrderedJson::object();
        operations[entry.op]["shapes"] = std::move(shapes);
    }
    OrderedJson out = OrderedJson::object();
    out["operations"] = std::move(operations);
    return out;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

FileFormat format_from_extension(const fs::path& path) {
    const auto ext = path.extension().string();
    if (ext == ".json") return FileFormat::json;
    if (ext == ".msgpack") return FileFormat::msgpack;
    throw InputError(path.string(), ext.empty()
                                        ? "no file extension (expected .json or .msgpack)"
                                        : "unknown file extension '" + ext +
                                              "' (expected .json or .msgpack)");
}

FileFormat parse_file_format(const std::string& name) {
    if (name == "json") return FileFormat::json;
    if (name == "msgpack") return FileFormat::msgpack;
    throw InputError("--format", "unknown format '" + name + "' (expected json or msgpack)");
}

DiodeLayout parse_diode_layout(const std::string& name) {
    if (name == "current") return DiodeLayout::current;
    if (name == "legacy") return DiodeLayout::legacy;
    throw InputError("--diode-layout", "unknown layout '" + name + "' (expected current or legacy)");
}

std::string extension_for(FileFormat format) {
    return format == FileFormat::json ? ".json" : ".msgpack";
}

std::string file_kind_name(FileKind kind) {
    switch (kind) {
        case FileKind::dataset: return "dataset";
        case FileKind::shapeset: return "shapeset";
        case FileKind::solution: return "solution";
    }
    return "unknown";
}

OrderedJson config_to_document(const GemmConfig& c) {
    OrderedJson j = OrderedJson::object();
    j["ACC_TYPE"] = c.acc_type;
    j["ALLOW_TF32"] = c.allow_tf32;
    j["EVEN_K"] = c.even_k;
    j["USE_FAST_ACCUM"] = c.use_fast_accum;
    j["block_k"] = c.block_k;
    j["block_m"] = c.block_m;
    j["block_n"] = c.block_n;
    j["grid"] = c.grid;
    j["group_m"] = c.group_m;
    j["name"] = c.name;
    j["num_stages"] = c.num_stages;
    j["num_warps"] = c.num_warps;
    j["version"] = c.version;
    return j;
}

OrderedJson shape_to_document(const MMShape& s) {
    OrderedJson j = OrderedJson::object();
    j["version"] = s.version;
    j["B"] = s.B;
    j["M"] = s.M;
    j["M_dtype"] = s.M_dtype;
    j["N"] = s.N;
    j["K"] = s.K;
    j["K_dtype"] = s.K_dtype;
    j["out_dtype"] = s.out_dtype;
    j["out_size"] = OrderedJson::array({s.out_size[0], s.out_size[1], s.out_size[2]});
    j["out_stride"] = OrderedJson::array({s.out_stride[0], s.out_stride[1], s.out_stride[2]});
    return j;
}

std::string shape_key(const MMShape& shape) { return python_json_dumps(shape_to_document(shape)); }

MMShape parse_shape_key(const std::string& key, const std::string& context) {
    return DocumentReader(context).shape_key(key, "shape key");
}

Dataset dataset_from_document(const OrderedJson& document, const std::string& subject,
                              DiodeLayout* layout_found) {
    const DocumentReader r(subject);
    if (!document.is_object()) {
        r.fail("", "expected an object at the top level, got " + json_type_name(document));
    }
    if (!document.contains("hardware")) {
        r.fail("", "missing field 'hardware' (not a torch-diode dataset)");
    }
    r.check_keys(document, "", {"hardware", "version"});
    r.optional_version(document, "");
    bool legacy = false;
    Dataset dataset;
    const auto& hardware = r.object(document["hardware"], "hardware");
    for (auto hw = hardware.begin(); hw != hardware.end(); ++hw) {
        const auto hw_where = DocumentReader::quoted("hardware", hw.key());
        r.object(hw.value(), hw_where);
        r.check_keys(hw.value(), hw_where, {"operation", "version"});
        r.optional_version(hw.value(), hw_where);
        const auto op_map_where = DocumentReader::child(hw_where, "operation");
        const auto& operations = r.object(r.required(hw.value(), "operation", hw_where), op_map_where);
        for (auto op = operations.begin(); op != operations.end(); ++op) {
            const auto op_where =
                DocumentReader::child(hw_where, DocumentReader::quoted("operation", op.key()));
            r.check_op(op.key(), op_where);
            r.object(op.value(), op_where);
            r.check_keys(op.value(), op_where, {"name", "solution", "version"});
            r.optional_version(op.value(), op_where);
            if (const auto* name = DocumentReader::optional(op.value(), "name")) {
                r.string(*name, DocumentReader::child(op_where, "name"));
                legacy = true;
            }
            const auto& solutions = r.object(r.required(op.value(), "solution", op_where),
                                             DocumentReader::child(op_where, "solution"));
            std::size_t index = 0;
            for (auto sol = solutions.begin(); sol != solutions.end(); ++sol, ++index) {
                const auto sol_where =
                    DocumentReader::child(op_where, DocumentReader::indexed("solution", index));
                const MMShape shape =
                    r.shape_key(sol.key(), DocumentReader::child(sol_where, "shape key"));
                r.object(sol.value(), sol_where);
                r.check_keys(sol.value(), sol_where, {"name", "timed_configs", "version"});
                r.optional_version(sol.value(), sol_where);
                if (const auto* name = DocumentReader::optional(sol.value(), "name")) {
                    r.string(*name, DocumentReader::child(sol_where, "name"));
                    legacy = true;
                }
                const auto& timed = r.array(r.required(sol.value(), "timed_configs", sol_where),
                                            DocumentReader::child(sol_where, "timed_configs"));
                for (std::size_t i = 0; i < timed.size(); ++i) {
                    const auto tc_where =
                        DocumentReader::child(sol_where, DocumentReader::indexed("timed_configs", i));
                    const auto& entry = r.object(timed[i], tc_where);
                    r.check_keys(entry, tc_where, {"config", "time", "version"});
                    TimedConfig tc;
                    bool was_string = false;
                    tc.config = r.config(r.required(entry, "config", tc_where),
                                         DocumentReader::child(tc_where, "config"), &was_string);
                    legacy = legacy || was_string;
                    const auto time_where = DocumentReader::child(tc_where, "time");
                    tc.time_ms = r.number(r.required(entry, "time", tc_where), time_where);
                    if (!std::isfinite(tc.time_ms) || tc.time_ms < 0) {
                        r.fail(time_where, "must be a finite non-negative number of milliseconds");
                    }
                    if (const auto* v = DocumentReader::optional(entry, "version")) {
                        tc.version = r.version(*v, DocumentReader::child(tc_where, "version"));
                    }
                    dataset.add_timing(hw.key(), op.key(), shape, tc);
                }
            }
        }
    }
    if (layout_found) *layout_found = legacy ? DiodeLayout::legacy : DiodeLayout::current;
    return dataset;
}

OrderedJson dataset_to_document(const Dataset& dataset, DiodeLayout layout) {
    const bool legacy = layout == DiodeLayout::legacy;
    OrderedJson hardware = OrderedJson::object();
    for (const auto& hw : dataset.hardware()) {
        OrderedJson operations = OrderedJson::object();
        for (const auto& op : hw.operations) {
            OrderedJson solutions = OrderedJson::object();
            for (const auto& problem : op.problems) {
                OrderedJson timed = OrderedJson::array();
                for (const auto& tc : problem.timed_configs) {
                    OrderedJson entry = OrderedJson::object();
                    const auto config = config_to_document(tc.config);
                    entry["config"] = legacy ? OrderedJson(python_json_dumps_sorted(config)) : config;
                    entry["time"] = tc.time_ms;
                    entry["version"] = tc.version;
                    timed.push_back(std::move(entry));
                }
                OrderedJson solution = OrderedJson::object();
                if (legacy) solution["name"] = op.name;
                solution["timed_configs"] = std::move(timed);
                solution["version"] = 1;
                solutions[shape_key(problem.shape)] = std::move(solution);
            }
            OrderedJson operation = OrderedJson::object();
            if (legacy) operation["name"] = op.name;
            operation["solution"] = std::move(solutions);
            operation["version"] = 1;
            operations[op.name] = std::move(operation);
        }
        OrderedJson entry = OrderedJson::object();
        entry["operation"] = std::move(operations);
        entry["version"] = 1;
        hardware[hw.name] = std::move(entry);
    }
    OrderedJson root = OrderedJson::object();
    root["hardware"] = std::move(hardware);
    root["version"] = 1;
    return root;
}

std::string dataset_to_json(const Dataset& dataset, DiodeLayout layout) {
    return python_json_dumps(dataset_to_document(dataset, layout), kJsonIndent);
}

OrderedJson load_document(const fs::path& path) {
    const auto format = format_from_extension(path);
    const auto bytes = read_file(path);
    return format == FileFormat::json ? parse_json_text(bytes, path.string())
                                      : parse_msgpack_bytes(bytes, path.string());
}

void save_document(const OrderedJson& document, const fs::path& path) {
    write_file_atomically(path, encode(document, format_from_extension(path)));
}

Dataset load_dataset(const fs::path& path) {
    return dataset_from_document(load_document(path), path.string());
}

Dataset load_dataset(const fs::path& path, DiodeLayout& layout_found) {
    return dataset_from_document(load_document(path), path.string(), &layout_found);
}

std::vector<fs::path> list_dataset_files(const fs::path& dir,
                                         const std::vector<std::string>& extensions) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        throw InputError(dir.string(), fs::exists(dir, ec) ? "not a directory" : "no such directory");
    }
    std::vector<std::string> wanted;
    for (const auto& e : extensions) wanted.push_back(normalized_extension(e));
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec);
    if (ec) throw InputError(dir.string(), "cannot list directory: " + ec.message());
    for (const auto& entry : it) {
        if (!entry.is_regular_file(ec)) continue;
        const auto name = entry.path().filename().string();
        if (ends_with(name, ".meta.json")) continue;
        const auto ext = entry.path().extension().string();
        if (std::find(wanted.begin(), wanted.end(), ext) != wanted.end()) {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

Dataset load_dataset_dir(const fs::path& dir, const std::vector<std::string>& extensions) {
    const auto files = list_dataset_files(dir, extensions);
    if (files.empty()) {
        std::string list;
        for (const auto& e : extensions) list += (list.empty() ? "" : ", ") + normalized_extension(e);
        throw InputError(dir.string(), "no dataset files (" + list + ") in this directory");
    }
    Dataset merged;
    for (const auto& file : files) merged.merge(load_dataset(file));
    return merged;
}

Dataset load_dataset_any(const fs::path& path, const std::vector<std::string>& extensions) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return load_dataset_dir(path, extensions);
    return load_dataset(path);
}

void save_dataset(const Dataset& dataset, const fs::path& path, DiodeLayout layout) {
    save_document(dataset_to_document(dataset, layout), path);
}

MMShape shape_from_document(const OrderedJson& value, const std::string& subject, const std::string& where) {
    return DocumentReader(subject).shape(value, where);
}

OperationShapeSet load_shapeset(const fs::path& path) {
    return shapeset_from_document(load_document(path), path.string());
}

void save_shapeset(const OperationShapeSet& shapeset, const fs::path& path) {
    save_document(shapeset_to_document(shapeset), path);
}

Solution load_solution(const fs::path& path) {
    return solution_from_document(load_document(path), path.string());
}

void save_solution(const Solution& solution, const fs::path& path) {
    save_document(solution_to_document(solution), path);
}

FileKind convert_file(const fs::path& input, const fs::path& output,
                      std::optional<DiodeLayout> layout) {
    const auto output_format = format_from_extension(output);
    const auto document = load_document(input);
    const auto subject = input.string();
    const auto kind = detect_kind(document, subject);
    OrderedJson converted;
    switch (kind) {
        case FileKind::dataset: {
            const auto dataset = dataset_from_document(document, subject);
            converted = layout ? dataset_to_document(dataset, *layout) : document;
            break;
        }
        case FileKind::shapeset:
            shapeset_from_document(document, subject);
            converted = document;
            break;
        case FileKind::solution:
            solution_from_document(document, subject);
            converted = document;
            break;
    }
    write_file_atomically(output, encode(converted, output_format));
    const auto sidecar = meta_sidecar_path(input);
    std::error_code ec;
    if (fs::exists(sidecar, ec)) save_meta_sidecar(output, load_meta_sidecar(input));
    return kind;
}

// A process killed mid-write (SIGKILL, power loss) leaves its temporary file, and the next
// writer of the same path is the one that knows it is garbage. Files of live writers are
// left alone.
void remove_stale_temp_files(const fs::path& path) {
    const std::string prefix = path.filename().string() + ".tmp";
    std::error_code ec;
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        const auto underscore = name.find('_', prefix.size());
        if (underscore == std::string::npos || underscore == prefix.size()) continue;
        const std::string digits = name.substr(prefix.size(), underscore - prefix.size());
        if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
        const auto pid = static_cast<pid_t>(std::stol(digits));
        if (pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
            std::error_code ignored;
            fs::remove(it->path(), ignored);
        }
    }
}

void check_not_read_only(const fs::path& path) {
    // The rename would replace a read-only file (it needs only the directory's permission,
    // and root ignores modes), so a file the user protected is refused instead.
    struct stat existing {};
    if (::stat(path.c_str(), &existing) == 0 &&
        (::access(path.c_str(), W_OK) != 0 || (existing.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0)) {
        throw InputError(path.string(), "is read-only; not overwriting it");
    }
}

void write_file_atomically(const fs::path& path, const std::string& content) {
    static std::atomic<unsigned> counter{0};
    const auto subject = path.string();
    std::error_code ec;
    if (path.has_parent_path()) {
        fs::create_directories(path.parent_path(), ec);
        if (ec) throw InputError(subject, "cannot create directory: " + ec.message());
    }
    if (fs::is_directory(path, ec)) throw InputError(subject, "is a directory, expected a file");
    check_not_read_only(path);
    remove_stale_temp_files(path);
    fs::path temp = path;
    temp += ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw InputError(subject, "cannot write: " + errno_text());
    const char* data = content.data();
    std::size_t left = content.size();
    while (left > 0) {
        const auto written = ::write(fd, data, left);
        if (written < 0) {
            if (errno == EINTR) continue;
            const auto why = errno_text();
            ::close(fd);
            ::unlink(temp.c_str());
            throw InputError(subject, "cannot write: " + why);
        }
        data += written;
        left -= static_cast<std::size_t>(written);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        const auto why = errno_text();
        ::unlink(temp.c_str());
        throw InputError(subject, "cannot write: " + why);
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const auto why = errno_text();
        ::unlink(temp.c_str());
        throw InputError(subject, "cannot write: " + why);
    }
}

std::string read_file(const fs::path& path) {
    const auto subject = path.string();
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (!fs::exists(status)) throw InputError(subject, "no such file");
    if (fs::is_directory(status)) throw InputError(subject, "is a directory, expected a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(subject, "cannot open: " + errno_text());
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw InputError(subject, "cannot read: " + errno_text());
    return buffer.str();
}

}  // namespace mmt::core
