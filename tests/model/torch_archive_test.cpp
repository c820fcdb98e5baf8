#include "torch_archive.hpp"

#include <cstring>
#include <set>
#include <sstream>

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/types.h>

namespace mmt::model {
namespace {

// Walks a protocol-2 pickle opcode by opcode and returns the GLOBALs it names
// ("module.name"). Fails the test on an opcode outside the set torch.save's pickles use.
std::set<std::string> globals_in(const std::string& pickle) {
    std::set<std::string> found;
    std::size_t i = 0;
    auto skip = [&](std::size_t n) { i += n; };
    while (i < pickle.size()) {
        const unsigned char op = static_cast<unsigned char>(pickle[i++]);
        switch (op) {
            case 0x80: skip(1); break;                                    // PROTO
            case '}': case ']': case '(': case 'u': case 'e': case ')':   // containers, MARK
            case 't': case 'N': case 0x88: case 0x89: case 'R': case 'Q': // TUPLE, None, bools, REDUCE, BINPERSID
                break;
            case '.': return found;                                       // STOP
            case 'K': case 'q': case 'h': skip(1); break;                 // BININT1, BINPUT, BINGET
            case 'M': skip(2); break;                                     // BININT2
            case 'J': case 'r': case 'j': skip(4); break;                 // BININT, LONG_BINPUT, LONG_BINGET
            case 'G': skip(8); break;                                     // BINFLOAT
            case 0x8a: skip(1 + static_cast<unsigned char>(pickle[i])); break;  // LONG1
            case 'X': {                                                   // BINUNICODE
                std::uint32_t n = 0;
                std::memcpy(&n, pickle.data() + i, 4);
                skip(4 + n);
                break;
            }
            case 'c': {                                                   // GLOBAL
                const auto nl1 = pickle.find('\n', i);
                const auto nl2 = pickle.find('\n', nl1 + 1);
                found.insert(pickle.substr(i, nl1 - i) + "." + pickle.substr(nl1 + 1, nl2 - nl1 - 1));
                i = nl2 + 1;
                break;
            }
            default:
                ADD_FAILURE() << "unexpected pickle opcode " << static_cast<int>(op) << " at " << i - 1;
                return found;
        }
    }
    ADD_FAILURE() << "pickle has no STOP";
    return found;
}

PyValue sample() {
    auto root = PyValue::make_dict();
    root.set("name", PyValue::from_string("hello"));
    root.set("small", PyValue::from_int(7));
    root.set("medium", PyValue::from_int(40000));
    root.set("negative", PyValue::from_int(-5));
    root.set("large", PyValue::from_int(int64_t{1} << 40));
    root.set("pi", PyValue::from_double(3.25));
    root.set("yes", PyValue::from_bool(true));
    auto list = PyValue::make_list();
    list.append(PyValue::from_int(1)).append(PyValue::from_string("two"));
    root.set("list", list);
    root.set("empty", PyValue::make_dict());
    auto state = PyValue::make_dict();
    state.set("w", PyValue::from_tensor(torch::arange(6, torch::kFloat32).reshape({2, 3})));
    state.set("count", PyValue::from_tensor(torch::tensor(int64_t{9})));
    root.set("state", state);
    return root;
}

TEST(TorchArchive, LibTorchReadsBackEveryValue) {
    const auto bytes = write_torch_archive(sample());
    const auto value = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    ASSERT_TRUE(value.isGenericDict());
    const auto dict = value.toGenericDict();
    auto at = [&](const char* key) { return dict.at(c10::IValue(std::string(key))); };
    EXPECT_EQ(at("name").toStringRef(), "hello");
    EXPECT_EQ(at("small").toInt(), 7);
    EXPECT_EQ(at("medium").toInt(), 40000);
    EXPECT_EQ(at("negative").toInt(), -5);
    EXPECT_EQ(at("large").toInt(), int64_t{1} << 40);
    EXPECT_DOUBLE_EQ(at("pi").toDouble(), 3.25);
    EXPECT_TRUE(at("yes").toBool());
    const auto list = at("list").toListRef();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].toInt(), 1);
    EXPECT_EQ(list[1].toStringRef(), "two");
    EXPECT_EQ(at("empty").toGenericDict().size(), 0u);
    const auto state = at("state").toGenericDict();
    const auto w = state.at(c10::IValue(std::string("w"))).toTensor();
    EXPECT_TRUE(torch::equal(w, torch::arange(6, torch::kFloat32).reshape({2, 3})));
    const auto count = state.at(c10::IValue(std::string("count"))).toTensor();
    EXPECT_EQ(count.dim(), 0);
    EXPECT_EQ(count.scalar_type(), torch::kLong);
    EXPECT_EQ(count.item<int64_t>(), 9);
}

// torch.load(weights_only=True), Python's default since torch 2.6, refuses any global
// outside its allow-list; torch.jit._pickle.* (what LibTorch's pickle_save emits) is not on it.
TEST(TorchArchive, PickleNamesOnlyGlobalsTorchLoadAllowsByDefault) {
    const auto bytes = write_torch_archive(sample());
    std::istringstream stream(bytes);
    caffe2::serialize::PyTorchStreamReader reader(&stream);
    ASSERT_TRUE(reader.hasRecord("data.pkl"));
    ASSERT_TRUE(reader.hasRecord("byteorder"));
    ASSERT_TRUE(reader.hasRecord("data/0"));
    ASSERT_TRUE(reader.hasRecord("data/1"));
    auto [data, size] = reader.getRecord("data.pkl");
    const std::string pickle(static_cast<const char*>(data.get()), size);
    EXPECT_EQ(pickle.find("torch.jit"), std::string::npos);
    const std::set<std::string> allowed{"torch._utils._rebuild_tensor_v2", "collections.OrderedDict",
                                        "torch.FloatStorage", "torch.LongStorage"};
    const auto globals = globals_in(pickle);
    EXPECT_FALSE(globals.empty());
    for (const auto& g : globals) EXPECT_TRUE(allowed.count(g)) << g;
}

}  // namespace
}  // namespace mmt::model
