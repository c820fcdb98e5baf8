// JSON text and msgpack bytes must be exactly what Python's json.dumps and msgpack.packb
// write; every expected value below was worked out by hand from Python's documented rules.

#include "matmul_toolkit/core/json_codec.hpp"

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

std::string bytes(std::initializer_list<int> values) {
    std::string out;
    for (int v : values) out.push_back(static_cast<char>(v));
    return out;
}

template <typename F>
std::string input_error_of(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no InputError)";
}

TEST(PythonFloatRepr, WritesShortestRoundTripDigits) {
    EXPECT_EQ(python_float_repr(0.1), "0.1");
    EXPECT_EQ(python_float_repr(0.5), "0.5");
    EXPECT_EQ(python_float_repr(-2.5), "-2.5");
    EXPECT_EQ(python_float_repr(0.02611199952661991), "0.02611199952661991");
    EXPECT_EQ(python_float_repr(1.0 / 3.0), "0.3333333333333333");
}

TEST(PythonFloatRepr, WritesIntegralFloatsWithPointZero) {
    EXPECT_EQ(python_float_repr(100.0), "100.0");
    EXPECT_EQ(python_float_repr(2.0), "2.0");
    EXPECT_EQ(python_float_repr(0.0), "0.0");
    EXPECT_EQ(python_float_repr(-0.0), "-0.0");
    EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
}

TEST(PythonFloatRepr, SwitchesToExponentBelow1eMinus4AndFrom1e16) {
    EXPECT_EQ(python_float_repr(0.0001), "0.0001");
    EXPECT_EQ(python_float_repr(0.00012), "0.00012");
    EXPECT_EQ(python_float_repr(1e-05), "1e-05");
    EXPECT_EQ(python_float_repr(2.5e-07), "2.5e-07");
    EXPECT_EQ(python_float_repr(1e16), "1e+16");
    EXPECT_EQ(python_float_repr(1.5e20), "1.5e+20");
    EXPECT_EQ(python_float_repr(-1.5e-300), "-1.5e-300");
    EXPECT_EQ(python_float_repr(123456789012345678.0), "1.2345678901234568e+17");
}

TEST(PythonFloatRepr, WritesJsonNamesForNonFinite) {
    EXPECT_EQ(python_float_repr(std::numeric_limits<double>::quiet_NaN()), "NaN");
    EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "Infinity");
    EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "-Infinity");
}

OrderedJson sample_document() {
    OrderedJson doc = OrderedJson::object();
    doc["a"] = OrderedJson::array({1, 2.5, "x"});
    doc["b"] = OrderedJson::object();
    doc["c"] = OrderedJson::array();
    doc["d"] = OrderedJson::object();
    doc["d"]["e"] = true;
    doc["d"]["f"] = nullptr;
    return doc;
}

TEST(PythonJsonDumps, IndentedLikeJsonDumpsIndent2) {
    const std::string expected =
        "{\n"
        "  \"a\": [\n"
        "    1,\n"
        "    2.5,\n"
        "    \"x\"\n"
        "  ],\n"
        "  \"b\": {},\n"
        "  \"c\": [],\n"
        "  \"d\": {\n"
        "    \"e\": true,\n"
        "    \"f\": null\n"
        "  }\n"
        "}";
    EXPECT_EQ(python_json_dumps(sample_document(), 2), expected);
}

TEST(PythonJsonDumps, CompactUsesCommaSpaceAndColonSpace) {
    EXPECT_EQ(python_json_dumps(sample_document()),
              "{\"a\": [1, 2.5, \"x\"], \"b\": {}, \"c\": [], \"d\": {\"e\": true, \"f\": null}}");
}

TEST(PythonJsonDumps, KeepsInsertionOrderUnlessSorted) {
    OrderedJson doc = OrderedJson::object();
    doc["b"] = 1;
    doc["a"] = OrderedJson::object();
    doc["a"]["d"] = 1;
    doc["a"]["c"] = -2;
    EXPECT_EQ(python_json_dumps(doc), "{\"b\": 1, \"a\": {\"d\": 1, \"c\": -2}}");
    EXPECT_EQ(python_json_dumps_sorted(doc), "{\"a\": {\"c\": -2, \"d\": 1}, \"b\": 1}");
}

TEST(PythonJsonDumps, EscapesLikeEnsureAscii) {
    // u-umlaut (2 bytes), trade mark (3 bytes), an emoji (4 bytes: a surrogate pair),
    // then the short escapes and two control characters.
    const OrderedJson text = "\xC3\xBC\xE2\x84\xA2\xF0\x9F\x98\x80\n\t\"\\\x01\x7F/";
    EXPECT_EQ(python_json_dumps(text),
              "\"\\u00fc\\u2122\\ud83d\\ude00\\n\\t\\\"\\\\\\u0001\\u007f/\"");
}

TEST(PythonJsonDumps, BytesThatAreNotUtf8BecomeReplacementCharacters) {
    // A stray continuation byte, an overlong '/', an encoded surrogate, a truncated
    // sequence: one U+FFFD per byte that starts no well-formed sequence.
    const OrderedJson text = "a\x80" "b\xC0\xAF\xED\xA0\x80\xE2\x84";
    EXPECT_EQ(python_json_dumps(text), "\"a\\ufffdb\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

TEST(PythonJsonDumps, WritesLargeIntegersExactly) {
    OrderedJson doc = OrderedJson::array({std::int64_t{-9007199254740993}, std::uint64_t{18446744073709551615ULL}});
    EXPECT_EQ(python_json_dumps(doc), "[-9007199254740993, 18446744073709551615]");
}

TEST(ParseJsonText, NamesTheFileAndPositionOfASyntaxError) {
    const auto message = input_error_of([] { parse_json_text("{\"a\": [1, 2", "x.json"); });
    EXPECT_EQ(message.rfind("x.json: invalid JSON: parse error at line 1, column 12", 0), 0u) << message;
}

TEST(ParseJsonText, RejectsAnEmptyFile) {
    EXPECT_EQ(input_error_of([] { parse_json_text(" \n", "x.json"); }),
              "x.json: invalid JSON: the file is empty");
}

TEST(ParseJsonText, RejectsAbsurdNesting) {
    const std::string deep = std::string(1000, '[') + std::string(1000, ']');
    EXPECT_NE(input_error_of([&] { parse_json_text(deep, "deep.json"); }).find("nested deeper"),
              std::string::npos);
}

TEST(ToMsgpackBytes, PacksLikeMsgpackPackb) {
    OrderedJson doc = OrderedJson::object();
    doc["a"] = 1;
    doc["b"] = OrderedJson::array({true, -1, 0.5});
    doc["c"] = "x";
    // fixmap(3) "a" 1 "b" fixarray(3)[true, -1, float64 0.5] "c" "x"
    const auto expected = bytes({0x83, 0xA1, 'a', 0x01, 0xA1, 'b', 0x93, 0xC3, 0xFF, 0xCB, 0x3F,
                                 0xE0, 0, 0, 0, 0, 0, 0, 0xA1, 'c', 0xA1, 'x'});
    EXPECT_EQ(to_msgpack_bytes(doc), expected);
}

TEST(ToMsgpackBytes, KeepsIntegralFloatsAsFloat64) {
    // 100.0 = 1.5625 * 2^6: exponent 1023 + 6 = 0x405, fraction 0.5625 = 0x9 << 48.
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(100.0)), bytes({0xCB, 0x40, 0x59, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(-0.0)), bytes({0xCB, 0x80, 0, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(python_json_dumps(parse_msgpack_bytes(to_msgpack_bytes(OrderedJson(100.0)), "m")), "100.0");
}

TEST(ToMsgpackBytes, UsesSmallestIntegerAndStr8Encodings) {
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(200)), bytes({0xCC, 0xC8}));
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(65536)), bytes({0xCE, 0x00, 0x01, 0x00, 0x00}));
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(-33)), bytes({0xD0, 0xDF}));
    const std::string forty(40, 'k');
    EXPECT_EQ(to_msgpack_bytes(OrderedJson(forty)), bytes({0xD9, 40}) + forty);
}

TEST(ParseMsgpackBytes, ReadsBackWhatWasPacked) {
    OrderedJson doc = OrderedJson::object();
    doc["z"] = OrderedJson::array({1, -7, 0.25, "s", false, nullptr});
    doc["a"] = OrderedJson::object();
    const auto back = parse_msgpack_bytes(to_msgpack_bytes(doc), "m.msgpack");
    EXPECT_EQ(python_json_dumps(back), "{\"z\": [1, -7, 0.25, \"s\", false, null], \"a\": {}}");
}

TEST(ParseMsgpackBytes, RejectsTruncatedData) {
    const auto packed = bytes({0x82, 0xA1, 'a', 0x01, 0xA1});
    EXPECT_EQ(input_error_of([&] { parse_msgpack_bytes(packed, "t.msgpack"); }),
              "t.msgpack: invalid msgpack: truncated data (the file ends inside a value)");
}

TEST(ParseMsgpackBytes, RejectsGarbageAfterTheValue) {
    EXPECT_EQ(input_error_of([] { parse_msgpack_bytes(bytes({0x80, 0x01, 0x02}), "g.msgpack"); }),
              "g.msgpack: invalid msgpack: 2 bytes of garbage after the first value");
}

TEST(ParseMsgpackBytes, RejectsNeverUsedByte) {
    const auto message = input_error_of([] { parse_msgpack_bytes(bytes({0x81, 0xA1, 'a', 0xC1}), "g.msgpack"); });
    EXPECT_EQ(message.rfind("g.msgpack: invalid msgpack", 0), 0u) << message;
}

TEST(ParseMsgpackBytes, RejectsNonStringKeysAndBinaryValues) {
    EXPECT_EQ(input_error_of([] { parse_msgpack_bytes(bytes({0x81, 0x01, 0x02}), "k.msgpack"); }),
              "k.msgpack: invalid msgpack: a map key is integer, expected str");
    EXPECT_EQ(input_error_of([] { parse_msgpack_bytes(bytes({0xC4, 0x01, 0x00}), "b.msgpack"); }),
              "b.msgpack: invalid msgpack: unexpected bin value (torch-diode files hold str, "
              "numbers, arrays, maps)");
}

TEST(ParseMsgpackBytes, RejectsInvalidUtf8AndEmptyInput) {
    EXPECT_EQ(input_error_of([] { parse_msgpack_bytes(bytes({0xA1, 0xFF}), "u.msgpack"); }),
              "u.msgpack: invalid msgpack: a string is not valid UTF-8");
    EXPECT_EQ(input_error_of([] { parse_msgpack_bytes("", "e.msgpack"); }),
              "e.msgpack: invalid msgpack: the file is empty");
}

TEST(JsonTypeName, NamesEachKind) {
    EXPECT_EQ(json_type_name(OrderedJson(1)), "integer");
    EXPECT_EQ(json_type_name(OrderedJson(-1)), "integer");
    EXPECT_EQ(json_type_name(OrderedJson(1.5)), "number");
    EXPECT_EQ(json_type_name(OrderedJson("s")), "string");
    EXPECT_EQ(json_type_name(OrderedJson(true)), "boolean");
    EXPECT_EQ(json_type_name(OrderedJson(nullptr)), "null");
    EXPECT_EQ(json_type_name(OrderedJson::array()), "array");
    EXPECT_EQ(json_type_name(OrderedJson::object()), "object");
}

}  // namespace
}  // namespace mmt::core
