#include "matmul_toolkit/core/json_codec.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <msgpack.hpp>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

// Nesting deeper than any file of ours can reach; it bounds the recursive writers.
constexpr std::size_t kMaxDepth = 128;

struct DecodedFloat {
    bool negative = false;
    std::string digits;  // significant digits, no dot, no leading zeros
    int exponent = 0;    // value = 0.d1d2d3... * 10^(exponent + 1), i.e. d1.d2d3 * 10^exponent
};

DecodedFloat decode_shortest(double value) {
    char buffer[64];
    const auto result =
        std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
    const std::string text(buffer, result.ptr);
    DecodedFloat out;
    std::size_t i = 0;
    if (text[i] == '-') {
        out.negative = true;
        ++i;
    }
    const auto e = text.find('e', i);
    for (std::size_t k = i; k < e; ++k) {
        if (text[k] != '.') out.digits.push_back(text[k]);
    }
    out.exponent = std::atoi(text.c_str() + e + 1);
    return out;
}

/// The length in bytes of the well-formed UTF-8 sequence at bytes[i] (1 to 4), its code
/// point in `code`; 0 when the bytes there are not UTF-8: a bad lead or continuation
/// byte, a truncated or overlong sequence, a surrogate or a value beyond U+10FFFF.
int decode_utf8(const unsigned char* bytes, std::size_t size, std::size_t i, std::uint32_t& code) {
    const unsigned char c = bytes[i];
    int length = 0;
    if (c < 0x80) {
        code = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        length = 2;
        code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        length = 3;
        code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        length = 4;
        code = c & 0x07;
    } else {
        return 0;
    }
    if (i + static_cast<std::size_t>(length) > size) return 0;
    for (int k = 1; k < length; ++k) {
        if ((bytes[i + k] & 0xC0) != 0x80) return 0;
        code = (code << 6) | (bytes[i + k] & 0x3F);
    }
    const bool overlong = (length == 2 && code < 0x80) || (length == 3 && code < 0x800) ||
                          (length == 4 && code < 0x10000);
    if (overlong || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
    return length;
}

void append_utf8_escaped(std::string& out, const std::string& text) {
    static const char* kHex = "0123456789abcdef";
    auto append_u = [&](std::uint32_t unit) {
        out += "\\u";
        out.push_back(kHex[(unit >> 12) & 0xF]);
        out.push_back(kHex[(unit >> 8) & 0xF]);
        out.push_back(kHex[(unit >> 4) & 0xF]);
        out.push_back(kHex[unit & 0xF]);
    };
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t size = text.size();
    std::size_t i = 0;
    while (i < size) {
        const unsigned char c = bytes[i];
        if (c < 0x80) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default:
                    if (c < 0x20 || c == 0x7F) {
                        append_u(c);
                    } else {
                        out.push_back(static_cast<char>(c));
                    }
            }
            ++i;
            continue;
        }
        std::uint32_t code = 0;
        const int length = decode_utf8(bytes, size, i, code);
        if (length == 0) {
            // Python could not hold such a string; the replacement character keeps output valid.
            append_u(0xFFFD);
            ++i;
            continue;
        }
        if (code >= 0x10000) {
            const std::uint32_t v = code - 0x10000;
            append_u(0xD800 | (v >> 10));
            append_u(0xDC00 | (v & 0x3FF));
        } else {
            append_u(code);
        }
        i += static_cast<std::size_t>(length);
    }
}

void append_string(std::string& out, const std::string& text) {
    out.push_back('"');
    append_utf8_escaped(out, text);
    out.push_back('"');
}

void dump(std::string& out, const OrderedJson& value, std::optional<int> indent, bool sort_keys,
          int level);

void newline_indent(std::string& out, std::optional<int> indent, int level) {
    out.push_back('\n');
    out.append(static_cast<std::size_t>(*indent) * static_cast<std::size_t>(level), ' ');
}

void dump_object(std::string& out, const OrderedJson& value, std::optional<int> indent,
                 bool sort_keys, int level) {
    if (value.empty()) {
        out += "{}";
        return;
    }
    std::vector<std::pair<const std::string*, const OrderedJson*>> items;
    items.reserve(value.size());
    for (auto it = value.begin(); it != value.end(); ++it) items.emplace_back(&it.key(), &it.value());
    if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return *a.first < *b.first; });
    }
    out.push_back('{');
    bool first = true;
    for (const auto& [key, item] : items) {
        if (!first) out += indent ? "," : ", ";
        first = false;
        if (indent) newline_indent(out, indent, level + 1);
        append_string(out, *key);
        out += ": ";
        dump(out, *item, indent, sort_keys, level + 1);
    }
    if (indent) newline_indent(out, indent, level);
    out.push_back('}');
}

void dump_array(std::string& out, const OrderedJson& value, std::optional<int> indent,
                bool sort_keys, int level) {
    if (value.empty()) {
        out += "[]";
        return;
    }
    out.push_back('[');
    bool first = true;
    for (const auto& item : value) {
        if (!first) out += indent ? "," : ", ";
        first = false;
        if (indent) newline_indent(out, indent, level + 1);
        dump(out, item, indent, sort_keys, level + 1);
    }
    if (indent) newline_indent(out, indent, level);
    out.push_back(']');
}

void dump(std::string& out, const OrderedJson& value, std::optional<int> indent, bool sort_keys,
          int level) {
    if (static_cast<std::size_t>(level) > kMaxDepth) {
        throw Error("JSON", "value nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    switch (value.type()) {
        case OrderedJson::value_t::null: out += "null"; break;
        case OrderedJson::value_t::boolean: out += value.get<bool>() ? "true" : "false"; break;
        case OrderedJson::value_t::number_integer:
            out += std::to_string(value.get<std::int64_t>());
            break;
        case OrderedJson::value_t::number_unsigned:
            out += std::to_string(value.get<std::uint64_t>());
            break;
        case OrderedJson::value_t::number_float:
            out += python_float_repr(value.get<double>());
            break;
        case OrderedJson::value_t::string: append_string(out, value.get_ref<const std::string&>()); break;
        case OrderedJson::value_t::array: dump_array(out, value, indent, sort_keys, level); break;
        case OrderedJson::value_t::object: dump_object(out, value, indent, sort_keys, level); break;
        case OrderedJson::value_t::binary:
        case OrderedJson::value_t::discarded:
            throw Error("JSON", "binary data cannot be written as JSON");
    }
}

using Packer = msgpack::packer<msgpack::sbuffer>;

// msgpack-cxx's pack_double writes integral doubles as integers; Python always writes
// float64 (0xcb), and a reader must get 100.0 back, not 100.
void pack_float64(msgpack::sbuffer& buffer, double value) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    char out[9];
    out[0] = static_cast<char>(0xCB);
    for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xFF);
    buffer.write(out, sizeof(out));
}

void pack(msgpack::sbuffer& buffer, Packer& packer, const OrderedJson& value, std::size_t depth) {
    if (depth > kMaxDepth) {
        throw Error("msgpack", "value nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    switch (value.type()) {
        case OrderedJson::value_t::null: packer.pack_nil(); break;
        case OrderedJson::value_t::boolean:
            if (value.get<bool>()) {
                packer.pack_true();
            } else {
                packer.pack_false();
            }
            break;
        case OrderedJson::value_t::number_integer: packer.pack_int64(value.get<std::int64_t>()); break;
        case OrderedJson::value_t::number_unsigned: packer.pack_uint64(value.get<std::uint64_t>()); break;
        case OrderedJson::value_t::number_float: pack_float64(buffer, value.get<double>()); break;
        case OrderedJson::value_t::string: {
            const auto& text = value.get_ref<const std::string&>();
            packer.pack_str(static_cast<std::uint32_t>(text.size()));
            packer.pack_str_body(text.data(), static_cast<std::uint32_t>(text.size()));
            break;
        }
        case OrderedJson::value_t::array:
            packer.pack_array(static_cast<std::uint32_t>(value.size()));
            for (const auto& item : value) pack(buffer, packer, item, depth + 1);
            break;
        case OrderedJson::value_t::object:
            packer.pack_map(static_cast<std::uint32_t>(value.size()));
            for (auto it = value.begin(); it != value.end(); ++it) {
                packer.pack_str(static_cast<std::uint32_t>(it.key().size()));
                packer.pack_str_body(it.key().data(), static_cast<std::uint32_t>(it.key().size()));
                pack(buffer, packer, it.value(), depth + 1);
            }
            break;
        case OrderedJson::value_t::binary: {
            const auto& bytes = value.get_binary();
            packer.pack_bin(static_cast<std::uint32_t>(bytes.size()));
            packer.pack_bin_body(reinterpret_cast<const char*>(bytes.data()),
                                 static_cast<std::uint32_t>(bytes.size()));
            break;
        }
        case OrderedJson::value_t::discarded: packer.pack_nil(); break;
    }
}

bool is_valid_utf8(const char* data, std::size_t size) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    std::size_t i = 0;
    std::uint32_t code = 0;
    while (i < size) {
        const int length = decode_utf8(bytes, size, i, code);
        if (length == 0) return false;
        i += static_cast<std::size_t>(length);
    }
    return true;
}

std::string msgpack_type_name(msgpack::type::object_type type) {
    switch (type) {
        case msgpack::type::NIL: return "nil";
        case msgpack::type::BOOLEAN: return "boolean";
        case msgpack::type::POSITIVE_INTEGER:
        case msgpack::type::NEGATIVE_INTEGER: return "integer";
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64: return "float";
        case msgpack::type::STR: return "str";
        case msgpack::type::BIN: return "bin";
        case msgpack::type::ARRAY: return "array";
        case msgpack::type::MAP: return "map";
        case msgpack::type::EXT: return "ext";
    }
    return "unknown";
}

std::string utf8_string(const msgpack::object_str& str, const std::string& subject) {
    if (!is_valid_utf8(str.ptr, str.size)) {
        throw InputError(subject, "invalid msgpack: a string is not valid UTF-8");
    }
    return std::string(str.ptr, str.size);
}

OrderedJson from_object(const msgpack::object& object, const std::string& subject) {
    switch (object.type) {
        case msgpack::type::NIL: return nullptr;
        case msgpack::type::BOOLEAN: return object.via.boolean;
        case msgpack::type::POSITIVE_INTEGER: return object.via.u64;
        case msgpack::type::NEGATIVE_INTEGER: return object.via.i64;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64: return object.via.f64;
        case msgpack::type::STR: return utf8_string(object.via.str, subject);
        case msgpack::type::ARRAY: {
            OrderedJson out = OrderedJson::array();
            for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
                out.push_back(from_object(object.via.array.ptr[i], subject));
            }
            return out;
        }
        case msgpack::type::MAP: {
            OrderedJson out = OrderedJson::object();
            for (std::uint32_t i = 0; i < object.via.map.size; ++i) {
                const auto& kv = object.via.map.ptr[i];
                if (kv.key.type != msgpack::type::STR) {
                    throw InputError(subject, "invalid msgpack: a map key is " +
                                                  msgpack_type_name(kv.key.type) +
                                                  ", expected str");
                }
                out[utf8_string(kv.key.via.str, subject)] = from_object(kv.val, subject);
            }
            return out;
        }
        case msgpack::type::BIN:
        case msgpack::type::EXT:
            break;
    }
    throw InputError(subject, "invalid msgpack: unexpected " + msgpack_type_name(object.type) +
                                  " value (torch-diode files hold str, numbers, arrays, maps)");
}

}  // namespace

std::string python_float_repr(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
    if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";

    const DecodedFloat f = decode_shortest(value);
    std::string out = f.negative ? "-" : "";
    const auto& d = f.digits;
    const int e = f.exponent;
    if (e < -4 || e >= 16) {
        out.push_back(d[0]);
        if (d.size() > 1) {
            out.push_back('.');
            out.append(d, 1, std::string::npos);
        }
        out.push_back('e');
        out.push_back(e < 0 ? '-' : '+');
        const int magnitude = std::abs(e);
        if (magnitude < 10) out.push_back('0');
        out += std::to_string(magnitude);
    } else if (e >= 0) {
        const auto int_digits = static_cast<std::size_t>(e) + 1;
        if (d.size() <= int_digits) {
            out += d;
            out.append(int_digits - d.size(), '0');
            out += ".0";
        } else {
            out.append(d, 0, int_digits);
            out.push_back('.');
            out.append(d, int_digits, std::string::npos);
        }
    } else {
        out += "0.";
        out.append(static_cast<std::size_t>(-e - 1), '0');
        out += d;
    }
    return out;
}

std::string python_json_dumps(const OrderedJson& value, std::optional<int> indent) {
    std::string out;
    dump(out, value, indent, false, 0);
    return out;
}

std::string python_json_dumps_sorted(const OrderedJson& value) {
    std::string out;
    dump(out, value, std::nullopt, true, 0);
    return out;
}

OrderedJson parse_json_text(const std::string& text, const std::string& subject) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
        throw InputError(subject, "invalid JSON: the file is empty");
    }
    const OrderedJson::parser_callback_t limit_depth =
        [&subject](int depth, OrderedJson::parse_event_t, OrderedJson&) {
            if (static_cast<std::size_t>(depth) > kMaxDepth) {
                throw InputError(subject, "invalid JSON: nested deeper than " +
                                              std::to_string(kMaxDepth) + " levels");
            }
            return true;
        };
    try {
        return OrderedJson::parse(text, limit_depth);
    } catch (const OrderedJson::exception& e) {
        // parse_error, and out_of_range for numbers beyond a double ("1E400").
        std::string what = e.what();
        // Drop nlohmann's "[json.exception.parse_error.101] " tag; keep line and column.
        const auto tag_end = what.find("] ");
        if (what.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos) {
            what = what.substr(tag_end + 2);
        }
        throw InputError(subject, "invalid JSON: " + what);
    }
}

std::string to_msgpack_bytes(const OrderedJson& value) {
    msgpack::sbuffer buffer;
    Packer packer(buffer);
    pack(buffer, packer, value, 0);
    return std::string(buffer.data(), buffer.size());
}

OrderedJson parse_msgpack_bytes(const std::string& bytes, const std::string& subject) {
    if (bytes.empty()) throw InputError(subject, "invalid msgpack: the file is empty");
    // msgpack allocates an array's or map's elements from its header's count before reading
    // them, so a few corrupt bytes could ask for gigabytes (found by fuzz_dataset_msgpack).
    // No count or length can exceed the input's size: every element takes at least a byte.
    const auto most = static_cast<std::size_t>(std::min<std::uint64_t>(bytes.size(), 0xffffffffu));
    const msgpack::unpack_limit limit(most, most / 2, most, most, most, kMaxDepth);
    std::size_t offset = 0;
    msgpack::object_handle handle;
    try {
        handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limit);
    } catch (const msgpack::insufficient_bytes&) {
        throw InputError(subject, "invalid msgpack: truncated data (the file ends inside a value)");
    } catch (const msgpack::depth_size_overflow&) {
        throw InputError(subject, "invalid msgpack: nested deeper than " +
                                      std::to_string(kMaxDepth) + " levels");
    } catch (const msgpack::size_overflow&) {
        throw InputError(subject, "invalid msgpack: a length or element count exceeds the file's size "
                                  "(corrupt or truncated data)");
    } catch (const std::exception& e) {
        throw InputError(subject, std::string("invalid msgpack: ") + e.what());
    }
    if (offset != bytes.size()) {
        throw InputError(subject, "invalid msgpack: " + std::to_string(bytes.size() - offset) +
                                      " bytes of garbage after the first value");
    }
    return from_object(handle.get(), subject);
}

std::string json_type_name(const OrderedJson& value) {
    switch (value.type()) {
        case OrderedJson::value_t::null: return "null";
        case OrderedJson::value_t::boolean: return "boolean";
        case OrderedJson::value_t::number_integer:
        case OrderedJson::value_t::number_unsigned: return "integer";
        case OrderedJson::value_t::number_float: return "number";
        case OrderedJson::value_t::string: return "string";
        case OrderedJson::value_t::array: return "array";
        case OrderedJson::value_t::object: return "object";
        case OrderedJson::value_t::binary: return "binary";
        case OrderedJson::value_t::discarded: return "discarded";
    }
    return "unknown";
}

}  // namespace mmt::core
