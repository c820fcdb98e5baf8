#pragma once
/// JSON text and msgpack bytes exactly as Python writes them, so files we write are
/// byte-for-byte what torch-diode (json.dumps / msgpack.packb) would write. nlohmann's
/// own dump differs from Python in float formatting and separators, hence this codec.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace mmt::core {

/// A JSON value whose objects keep their insertion order (Python dicts do too).
using OrderedJson = nlohmann::ordered_json;

/// Python's repr(float): shortest round-trip digits, "100.0", "1e-05", "1.5e+20",
/// and json's "NaN" / "Infinity" / "-Infinity".
std::string python_float_repr(double value);

/// json.dumps(value, indent=indent): with an indent, "," ends lines and ": " follows
/// keys; without, ", " and ": " separate. Non-ASCII is escaped as \uXXXX
/// (ensure_ascii=True). No trailing newline.
std::string python_json_dumps(const OrderedJson& value, std::optional<int> indent = std::nullopt);

/// json.dumps(value, sort_keys=True): object keys sorted at every level, no indent.
std::string python_json_dumps_sorted(const OrderedJson& value);

/// Parses JSON text; throws InputError(subject, "invalid JSON: <where and why>").
OrderedJson parse_json_text(const std::string& text, const std::string& subject);

/// msgpack.packb(value, use_bin_type=True): one value, strings as str, floats as
/// float64, integers in their smallest encoding.
std::string to_msgpack_bytes(const OrderedJson& value);

/// Decodes exactly one msgpack value (maps need string keys, strings valid UTF-8);
/// throws InputError(subject, ...) on truncated, garbled or trailing data.
OrderedJson parse_msgpack_bytes(const std::string& bytes, const std::string& subject);

/// A JSON type name for error messages: "string", "integer", "number", "object", ...
std::string json_type_name(const OrderedJson& value);

}  // namespace mmt::core
