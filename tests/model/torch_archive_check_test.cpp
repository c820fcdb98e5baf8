#include "torch_archive_check.hpp"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "matmul_toolkit/model/inference_model.hpp"
#include "matmul_toolkit/model/predictor.hpp"
#include "predictor_impl.hpp"
#include "torch_archive.hpp"

namespace mmt::model {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(MMT_SOURCE_DIR) / "tests/fuzz/corpus/checkpoint";
const fs::path kRegressions = fs::path(MMT_SOURCE_DIR) / "tests/fuzz/regressions/checkpoint";

// ---- building archives and pickles by hand ----------------------------------------------

std::string archive(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& records = {}) {
    std::string out;
    caffe2::serialize::PyTorchStreamWriter writer([&out](const void* data, size_t size) {
        out.append(static_cast<const char*>(data), size);
        return size;
    });
    writer.writeRecord("data.pkl", pickle.data(), pickle.size());
    for (const auto& [name, bytes] : records) writer.writeRecord(name, bytes.data(), bytes.size());
    writer.writeEndOfFile();
    return out;
}

std::string u32(std::uint32_t v) {
    std::string s(4, '\0');
    std::memcpy(s.data(), &v, 4);
    return s;
}

// A literal that may hold NUL bytes.
template <std::size_t N>
std::string raw(const char (&s)[N]) {
    return std::string(s, N - 1);
}

std::string str(const std::string& s) { return "X" + u32(static_cast<std::uint32_t>(s.size())) + s; }
std::string small_int(int v) { return std::string("K") + static_cast<char>(v); }
std::string pickle(const std::string& body) { return std::string("\x80\x02", 2) + body + "."; }

// A float tensor over storage data/0 of `numel` elements, with the given sizes (contiguous).
std::string tensor(int numel, const std::vector<int>& sizes, int offset = 0) {
    std::string t = "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" + str("0") +
                    str("cpu") + small_int(numel) + "tQ" + small_int(offset) + "(";
    for (int s : sizes) t += small_int(s);
    t += "t(";
    int stride = 1;
    std::vector<int> strides(sizes.size());
    for (std::size_t d = sizes.size(); d-- > 0;) {
        strides[d] = stride;
        stride *= sizes[d];
    }
    for (int s : strides) t += small_int(s);
    t += "t\x89" "ccollections\nOrderedDict\n)RtR";
    return t;
}

std::string floats(int n) { return std::string(static_cast<std::size_t>(n) * 4, '\0'); }

std::string refusal(const std::string& bytes) {
    try {
        (void)check_torch_archive(bytes, "x.pt");
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "x.pt");
        EXPECT_NE(std::string(e.what()).find("not a matmul_toolkit checkpoint: "), std::string::npos) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "accepted";
    return "";
}

// ---- what must pass ---------------------------------------------------------------------

TEST(TorchArchiveCheck, TheSeedCheckpointsPassAndLibTorchReadsThem) {
    // Two tiny trained models (base, deep) and one re-saved as Python's torch.save lays out
    // a dict (tests/fuzz/python_style_checkpoint.py: memo opcodes, another folder name,
    // torch 2.x's extra records, a plain zip without zip64 records).
    std::size_t checked = 0;
    for (const auto& entry : fs::directory_iterator(kCorpus)) {
        const std::string bytes = core::read_file(entry.path());
        const auto summary = check_torch_archive(bytes, entry.path().string());
        EXPECT_GT(summary.tensors, 0u) << entry.path();
        EXPECT_GT(summary.storage_elements, 0u) << entry.path();
        const auto root = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
        ASSERT_TRUE(root.isGenericDict()) << entry.path();
        EXPECT_TRUE(root.toGenericDict().contains(c10::IValue(std::string("model_state_dict")))) << entry.path();
        if (entry.path().filename() == "python_style.pt") EXPECT_EQ(summary.prefix, "python_style");
        ++checked;
    }
    EXPECT_GE(checked, 3u);
}

TEST(TorchArchiveCheck, AFolderNamedAfterAFileWithSpacesPasses) {
    // torch.save names the archive's folder after the file: "my model.pt" -> "my model/".
    std::string bytes = core::read_file(kCorpus / "python_style.pt");
    for (auto at = bytes.find("python_style/"); at != std::string::npos; at = bytes.find("python_style/")) {
        bytes[at + 6] = ' ';
    }
    EXPECT_EQ(check_torch_archive(bytes, "x.pt").prefix, "python style");
    EXPECT_TRUE(torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).isGenericDict());
}

TEST(TorchArchiveCheck, EveryValueKindOurWriterAndPythonUsePassesAndReadsBack) {
    // SETITEMS, APPENDS, TUPLE1-3, LONG1, BINFLOAT, bools, None, memo of strings
    // and tuples, and a tensor: what LibTorch builds must match what the check accepted.
    const std::string body = raw("}q\x00(") + str("name") + "q\x01" + str("cpu") + "q\x02" + str("big") + "\x8a\x08" +
                             std::string("\x00\x00\x00\x00\x00\x01\x00\x00", 8) + str("pi") + "G@\t!\xfbTD-\x18" +
                             str("flags") + "\x88\x89N\x87" + str("pair") + small_int(1) + small_int(2) + "\x86" +
                             str("one") + "h\x02\x85" + str("list") + "](" + small_int(7) + "h\x01" + "e" +
                             str("w") + tensor(6, {2, 3}) + "u";
    const auto bytes = archive(pickle(body), {{"data/0", floats(6)}});
    const auto summary = check_torch_archive(bytes, "x.pt");
    EXPECT_EQ(summary.tensors, 1u);
    EXPECT_EQ(summary.storage_elements, 6u);
    const auto root = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
    auto at = [&](const char* key) { return root.at(c10::IValue(std::string(key))); };
    EXPECT_EQ(at("name").toStringRef(), "cpu");
    EXPECT_EQ(at("big").toInt(), std::int64_t{1} << 40);
    EXPECT_EQ(at("flags").toTupleRef().elements().size(), 3u);
    EXPECT_EQ(at("one").toTupleRef().elements()[0].toStringRef(), "cpu");
    EXPECT_EQ(at("list").toListRef().size(), 2u);
    EXPECT_EQ(at("w").toTensor().sizes(), (std::vector<std::int64_t>{2, 3}));

    // Our reader builds the same values.
    const TorchArchive ours = read_torch_archive(bytes, "x.pt");
    const auto& dict = ours.root;
    EXPECT_EQ(dict.find("name")->text, "cpu");
    EXPECT_EQ(dict.find("big")->integer, std::int64_t{1} << 40);
    EXPECT_EQ(dict.find("pi")->real, 3.141592653589793);
    ASSERT_EQ(dict.find("flags")->items->size(), 3u);
    EXPECT_EQ((*dict.find("flags")->items)[0].kind, ArchiveValue::Kind::boolean);
    EXPECT_EQ((*dict.find("flags")->items)[2].kind, ArchiveValue::Kind::none);
    EXPECT_EQ((*dict.find("one")->items)[0].text, "cpu");
    ASSERT_EQ(dict.find("list")->items->size(), 2u);
    EXPECT_EQ((*dict.find("list")->items)[0].integer, 7);
    EXPECT_EQ((*dict.find("list")->items)[1].text, "name");
    EXPECT_EQ(dict.find("w")->tensor->sizes, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(dict.find("w")->tensor->values(), std::vector<double>(6, 0.0));

    // SETITEM, Python's opcode for a one-item dict: LibTorch 2.x reads it, 1.13 answers
    // with an exception (not a crash), so the check lets it through to LibTorch; our reader
    // reads it.
    const auto one_item = archive(pickle("}" + str("k") + small_int(1) + "s"));
    EXPECT_NO_THROW(check_torch_archive(one_item, "x.pt"));
    EXPECT_EQ(read_torch_archive(one_item, "x.pt").root.find("k")->integer, 1);
}

TEST(TorchArchiveCheck, WhatOurWriterWritesPasses) {
    auto root = PyValue::make_dict();
    root.set("w", PyValue::from_tensor(torch::ones({3, 2}, torch::kFloat64)));
    root.set("n", PyValue::from_tensor(torch::tensor(std::int64_t{4})));
    root.set("empty", PyValue::from_tensor(torch::zeros({0}, torch::kFloat32)));
    const auto summary = check_torch_archive(write_torch_archive(root), "x.pt");
    EXPECT_EQ(summary.prefix, "archive");
    EXPECT_EQ(summary.tensors, 3u);
    EXPECT_EQ(summary.storage_elements, 7u);
}

// ---- what must be refused ---------------------------------------------------------------

TEST(TorchArchiveCheck, ATruncatedArchiveIsRefusedWhereverItIsCut) {
    // The fuzzer's first find: LibTorch's zip reader read past the end of a truncated archive.
    const std::string bytes = core::read_file(kCorpus / "base_tiny.pt");
    for (std::size_t cut = 0; cut < bytes.size(); cut += 61) {
        EXPECT_NE(refusal(bytes.substr(0, cut)), "") << "cut at " << cut;
    }
    EXPECT_NE(refusal(bytes.substr(0, bytes.size() - 1)).find("end-of-central-directory"), std::string::npos);
    EXPECT_NE(refusal("not a model").find("not a zip archive"), std::string::npos);
}

TEST(TorchArchiveCheck, ZipStructureLiesAreRefused) {
    const std::string good = archive(pickle("}"));
    std::string compressed = good;
    const auto central = compressed.find("PK\x01\x02");
    ASSERT_NE(central, std::string::npos);
    compressed[central + 10] = 8;  // deflate
    EXPECT_NE(refusal(compressed).find("is compressed"), std::string::npos);

    std::string moved = good;
    moved[central + 42] = static_cast<char>(moved[central + 42] + 1);  // local header offset
    EXPECT_NE(refusal(moved).find("local header"), std::string::npos);

    std::string patched = good;  // general-purpose flag 0x20, "compressed patched data"
    patched[central + 8] = static_cast<char>(patched[central + 8] | 0x20);
    EXPECT_NE(refusal(patched).find("uses zip features"), std::string::npos);
    patched[central + 9] = static_cast<char>(patched[central + 9] | 0x20);  // 0x2000: masked headers
    EXPECT_NE(refusal(patched).find("is encrypted"), std::string::npos);

    std::string directory = good;  // the DOS directory bit: LibTorch reads no bytes for it
    directory[central + 38] = 0x10;
    EXPECT_NE(refusal(directory).find("marked as a directory"), std::string::npos);

    std::string renamed = good;  // the version record moved out of the folder, in both headers
    for (auto at = renamed.find("archive/version"); at != std::string::npos; at = renamed.find("archive/version")) {
        renamed[at] = 'z';
    }
    EXPECT_NE(refusal(renamed).find("not inside the archive's folder"), std::string::npos);
}

TEST(TorchArchiveCheck, TheVersionRecordMustBeOneLibTorchReads) {
    std::string bytes = archive(pickle("}"));
    const auto at = bytes.find("3", bytes.find("archive/version") + 15);  // the record's data
    ASSERT_NE(at, std::string::npos);
    bytes[at] = '0';
    EXPECT_NE(refusal(bytes).find("archive format version 0"), std::string::npos);
    bytes[at] = 'x';
    EXPECT_NE(refusal(bytes).find("the version record is not a number"), std::string::npos);
}

TEST(TorchArchiveCheck, StorageRecordsMustExistAndMatchTheirTensors) {
    EXPECT_NE(refusal(archive(pickle("}" + str("w") + tensor(6, {6}) + "s"))).find("missing record 'data/0'"),
              std::string::npos);
    EXPECT_NE(refusal(archive(pickle("}" + str("w") + tensor(6, {6}) + "s"), {{"data/0", floats(3)}}))
                  .find("claims 24 bytes but record 'data/0' holds 12"),
              std::string::npos);
    EXPECT_NE(refusal(archive(pickle("}" + str("w") + tensor(6, {7}) + "s"), {{"data/0", floats(6)}}))
                  .find("reaches element 6 of a storage of 6"),
              std::string::npos);
    EXPECT_NE(refusal(archive(pickle("}" + str("w") + tensor(6, {2, 3}, 1) + "s"), {{"data/0", floats(6)}}))
                  .find("reaches element 6"),
              std::string::npos);
}

TEST(TorchArchiveCheck, PicklesOutsideTheCheckpointSubsetAreRefused) {
    auto refused = [](const std::string& body) { return refusal(archive(pickle(body))); };
    EXPECT_NE(refused("cos\nsystem\n" + str("ls") + "\x85R").find("the global os.system"), std::string::npos);
    EXPECT_NE(refused("ctorch\nTensor\n").find("torch.Tensor"), std::string::npos);
    EXPECT_NE(refused("ctorch\nBoolStorage\n").find("torch.BoolStorage"), std::string::npos);
    EXPECT_NE(refused("]" + small_int(1) + "a").find("opcode 0x61"), std::string::npos);  // APPEND
    EXPECT_NE(refused(raw("}q\x00h\x00") + small_int(1) + "s").find("referenced twice"), std::string::npos);
    EXPECT_NE(refused(std::string("}r\xff\xff\xff\x7f", 6)).find("memo slot far past"), std::string::npos);
    EXPECT_NE(refused("}h\x05").find("never filled"), std::string::npos);
    EXPECT_NE(refused("}" + str("a") + "u").find("needs a MARK"), std::string::npos);
    EXPECT_NE(refused("}(" + str("a") + "u").find("a key but no value"), std::string::npos);
    EXPECT_NE(refused("}(" + small_int(1) + "\x86").find("finds fewer"), std::string::npos);  // TUPLE2 across a MARK
    EXPECT_NE(refused("]").find("holds a list, not a dict"), std::string::npos);
    EXPECT_NE(refused("}}").find("more than one value"), std::string::npos);
    EXPECT_NE(refused("}(]" + small_int(1) + "u").find("a dict key is a list"), std::string::npos);
    EXPECT_NE(refused(std::string("}\x8a\x02\x01\x00", 5)).find("not 8 bytes"), std::string::npos);
    EXPECT_NE(refused("}" + std::string("X\xff\xff\xff\x0f", 5)).find("ends inside an opcode"), std::string::npos);
    EXPECT_NE(refused(small_int(1) + ")R").find("REDUCE calls an int"), std::string::npos);
    EXPECT_NE(refusal(archive(std::string("\x80\x02}", 3))).find("ends without STOP"), std::string::npos);
    EXPECT_NE(refusal(archive(pickle("}") + "}")).find("bytes after STOP"), std::string::npos);

    std::string deep = "}" + str("a");
    for (int i = 0; i < 40; ++i) deep += "](";
    for (int i = 0; i < 40; ++i) deep += "e";
    EXPECT_NE(refused(deep + "s").find("nested more than 32 deep"), std::string::npos);
}

// ---- through the loader -------------------------------------------------------------------

TEST(TorchArchiveCheck, EveryFuzzRegressionIsRefusedWithAnInputErrorByTheLoader) {
    std::size_t replayed = 0;
    for (const auto& entry : fs::directory_iterator(kRegressions)) {
        const auto refused = [&](const auto& load) {
            try {
                load(entry.path());
                ADD_FAILURE() << entry.path() << " loaded";
            } catch (const core::InputError& e) {
                EXPECT_EQ(e.subject(), entry.path().string());
            } catch (const std::exception& e) {
                ADD_FAILURE() << entry.path() << ": " << e.what();
            }
        };
        refused([](const fs::path& path) { (void)Predictor::load(path); });
        refused([](const fs::path& path) { (void)InferenceModel::load(path); });
        ++replayed;
    }
    EXPECT_GE(replayed, 1u);
}

TEST(TorchArchiveCheck, AnArchitectureLargerThanTheFileIsRefusedBeforeItIsBuilt) {
    // Hidden sizes are plain ints in the pickle; without this check a 4-byte edit asked
    // LibTorch for a 2^30-wide layer.
    ModelInfo info;
    info.spec.type = ModelType::base;
    info.spec.hidden_dims = {4};
    info.feature_names = feature_names();
    info.feature_mean.assign(num_features(), 0.0f);
    info.feature_std.assign(num_features(), 1.0f);
    info.hardware_name = "test";
    RuntimeNet net(info.spec, static_cast<int>(num_features()));
    Predictor model(std::make_unique<Predictor::Impl>(info, net, c10::Device(c10::kCPU)));
    model.impl().info.spec.hidden_dims = {1 << 30};
    const auto path = fs::temp_directory_path() / ("mmt_archive_check_" + std::to_string(::getpid()) + ".pt");
    model.save(path);
    try {
        (void)Predictor::load(path);
        ADD_FAILURE() << "loaded";
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("the architecture needs at least"), std::string::npos) << e.what();
    }
    fs::remove(path);
}

}  // namespace
}  // namespace mmt::model
