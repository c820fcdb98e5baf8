// torch-diode-compatible files: the hand-written files under tests/data were written the
// way torch-diode writes them (json.dumps(indent=2)); expected counts are counted by hand.

#include "matmul_toolkit/core/dataset_io.hpp"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/core/meta_sidecar.hpp"

namespace mmt::core {
namespace {
namespace fs = std::filesystem;

const fs::path kData = MMT_TEST_DATA_DIR;

template <typename F>
std::string input_error_of(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no InputError)";
}

class TempDir : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        m_dir = fs::temp_directory_path() /
                ("mmt_dataset_io_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    const fs::path& dir() const { return m_dir; }

private:
    fs::path m_dir;
};

// ---- formats and names ----

TEST(FileFormats, FollowTheExtension) {
    EXPECT_EQ(format_from_extension("a/b.json"), FileFormat::json);
    EXPECT_EQ(format_from_extension("b.msgpack"), FileFormat::msgpack);
    EXPECT_EQ(input_error_of([] { format_from_extension("b.txt"); }),
              "b.txt: unknown file extension '.txt' (expected .json or .msgpack)");
    EXPECT_EQ(extension_for(FileFormat::msgpack), ".msgpack");
    EXPECT_EQ(parse_file_format("msgpack"), FileFormat::msgpack);
    EXPECT_EQ(parse_diode_layout("legacy"), DiodeLayout::legacy);
    EXPECT_EQ(input_error_of([] { parse_diode_layout("old"); }),
              "--diode-layout: unknown layout 'old' (expected current or legacy)");
}

TEST(ShapeKey, IsStrOfTorchDiodesMMShape) {
    EXPECT_EQ(shape_key(make_shape(1, 32, 32, 32, "float16")),
              "{\"version\": 1, \"B\": 1, \"M\": 32, \"M_dtype\": \"float16\", \"N\": 32, "
              "\"K\": 32, \"K_dtype\": \"float16\", \"out_dtype\": \"float16\", "
              "\"out_size\": [1, 32, 32], \"out_stride\": [1024, 32, 1]}");
}

TEST(ShapeKey, ParsesBack) {
    const auto shape = make_shape(4, 128, 64, 32, "bfloat16");
    EXPECT_EQ(parse_shape_key(shape_key(shape), "ctx"), shape);
    EXPECT_EQ(input_error_of([] { parse_shape_key("{\"B\": 1}", "ctx"); }),
              "ctx: shape key: missing field 'M'");
}

// ---- loading both layouts ----

TEST(LoadDataset, ReadsTheCurrentLayout) {
    DiodeLayout layout = DiodeLayout::legacy;
    const auto dataset = load_dataset(kData / "dataset_current.json", layout);

    EXPECT_EQ(layout, DiodeLayout::current);
    ASSERT_EQ(dataset.hardware().size(), 2u);
    EXPECT_EQ(dataset.hardware()[0].name, "NVIDIA H100");
    EXPECT_EQ(dataset.hardware()[1].name, "Ryzen\xE2\x84\xA2 9 cpu");  // "\u2122" decoded
    EXPECT_EQ(dataset.num_problems(), 4u);  // mm: 2, addmm: 1, bmm_nt: 1
    EXPECT_EQ(dataset.num_timings(), 8u);   // 3 + 2 + 1 + 2

    const auto& addmm = dataset.hardware()[0].operations[1];
    EXPECT_EQ(addmm.name, "addmm");
    const auto& timed = addmm.problems[0].timed_configs[0];
    EXPECT_EQ(addmm.problems[0].shape, make_shape(1, 64, 64, 64, "float32"));
    EXPECT_TRUE(timed.config.allow_tf32);
    EXPECT_FALSE(timed.config.even_k);
    EXPECT_EQ(timed.config.block_m, 64);
    EXPECT_EQ(timed.config.block_k, 32);
    EXPECT_DOUBLE_EQ(timed.time_ms, 0.5);
}

TEST(LoadDataset, ReadsTheLegacyLayout) {
    DiodeLayout layout = DiodeLayout::current;
    const auto dataset = load_dataset(kData / "dataset_legacy.json", layout);

    EXPECT_EQ(layout, DiodeLayout::legacy);
    EXPECT_EQ(dataset.hardware().size(), 1u);
    EXPECT_EQ(dataset.num_problems(), 2u);
    EXPECT_EQ(dataset.num_timings(), 3u);
    const auto& first = dataset.hardware()[0].operations[0].problems[0].timed_configs[0];
    EXPECT_EQ(first.config.name, "mm_config");
    EXPECT_EQ(first.config.block_k, 16);
    EXPECT_EQ(first.config.num_stages, 1);
    EXPECT_EQ(first.config.num_warps, 2);
    EXPECT_DOUBLE_EQ(first.time_ms, 0.02611199952661991);
}

TEST(LoadDataset, FillsTorchDiodeDefaultsForMissingOptionalFields) {
    const auto dataset = load_dataset(kData / "dataset_minimal.json");

    ASSERT_EQ(dataset.num_timings(), 1u);
    const auto& timed = dataset.hardware()[0].operations[0].problems[0].timed_configs[0];
    EXPECT_FALSE(timed.config.even_k);
    EXPECT_FALSE(timed.config.allow_tf32);
    EXPECT_FALSE(timed.config.use_fast_accum);
    EXPECT_EQ(timed.config.acc_type, "tl.float32");
    EXPECT_EQ(timed.config.version, 1);
    EXPECT_EQ(timed.version, 1);
    EXPECT_DOUBLE_EQ(timed.time_ms, 2.0);  // an integer time is accepted as a number
}

// ---- writing ----

std::string text_of(const fs::path& path) { return read_file(path); }

TEST(DatasetToJson, WritesTheCurrentLayoutBackByteForByte) {
    const auto original = text_of(kData / "dataset_current.json");
    EXPECT_EQ(dataset_to_json(load_dataset(kData / "dataset_current.json")), original);
}

TEST(DatasetToJson, WritesTheLegacyLayoutBackByteForByte) {
    const auto original = text_of(kData / "dataset_legacy.json");
    EXPECT_EQ(dataset_to_json(load_dataset(kData / "dataset_legacy.json"), DiodeLayout::legacy),
              original);
}

TEST(DatasetToJson, WritesLegacyConfigsAsSortedJsonStrings) {
    Dataset dataset;
    GemmConfig config;
    config.block_m = 128;
    dataset.add_timing("gpu", "mm", make_shape(1, 8, 8, 8, "float16"), TimedConfig{config, 1.0, 1});
    const auto document = dataset_to_document(dataset, DiodeLayout::legacy);
    const auto& operation = document["hardware"]["gpu"]["operation"]["mm"];
    EXPECT_EQ(operation["name"], "mm");
    const auto& solution = operation["solution"].begin().value();
    EXPECT_EQ(solution["name"], "mm");
    EXPECT_EQ(solution["timed_configs"][0]["config"],
              "{\"ACC_TYPE\": \"tl.float32\", \"ALLOW_TF32\": false, \"EVEN_K\": false, "
              "\"USE_FAST_ACCUM\": false, \"block_k\": 32, \"block_m\": 128, \"block_n\": 64, "
              "\"grid\": 1, \"group_m\": 8, \"name\": \"mm\", \"num_stages\": 2, "
              "\"num_warps\": 4, \"version\": 1}");
}

TEST(DatasetToJson, WritesAnEmptyDataset) {
    EXPECT_EQ(dataset_to_json(Dataset{}), "{\n  \"hardware\": {},\n  \"version\": 1\n}");
}

using DatasetFiles = TempDir;

TEST_F(DatasetFiles, JsonToMsgpackToJsonIsLossless) {
    const auto original = text_of(kData / "dataset_current.json");
    save_dataset(load_dataset(kData / "dataset_current.json"), dir() / "d.msgpack");
    EXPECT_EQ(dataset_to_json(load_dataset(dir() / "d.msgpack")), original);
}

TEST_F(DatasetFiles, MsgpackHoldsTheSameStructureAsTheJson) {
    save_dataset(load_dataset(kData / "dataset_legacy.json"), dir() / "d.msgpack", DiodeLayout::legacy);
    const auto from_msgpack = parse_msgpack_bytes(read_file(dir() / "d.msgpack"), "m");
    const auto from_json = parse_json_text(text_of(kData / "dataset_legacy.json"), "j");
    EXPECT_EQ(python_json_dumps(from_msgpack), python_json_dumps(from_json));
}

TEST_F(DatasetFiles, DirectoryLoaderMergesEveryListedFileAndSkipsSidecars) {
    fs::copy_file(kData / "dataset_current.json", dir() / "a.json");
    save_dataset(load_dataset(kData / "dataset_legacy.json"), dir() / "b.msgpack");
    write_file_atomically(dir() / "a.json.meta.json", "{}");
    write_file_atomically(dir() / "notes.txt", "not a dataset");

    EXPECT_EQ(list_dataset_files(dir(), {"json", ".msgpack"}),
              (std::vector<fs::path>{dir() / "a.json", dir() / "b.msgpack"}));
    const auto merged = load_dataset_any(dir());
    // Both files share H100's first mm problem: its 3 + 2 timings land in one problem.
    EXPECT_EQ(merged.hardware().size(), 2u);
    EXPECT_EQ(merged.num_problems(), 5u);  // 4 from a.json + the float32 64^3 mm of b
    EXPECT_EQ(merged.num_timings(), 11u);  // 8 + 3
    EXPECT_EQ(load_dataset_dir(dir(), {"json"}).num_timings(), 8u);
}

TEST_F(DatasetFiles, DirectoryWithoutDatasetsIsAnError) {
    EXPECT_EQ(input_error_of([&] { load_dataset_dir(dir(), {"json", "msgpack"}); }),
              dir().string() + ": no dataset files (.json, .msgpack) in this directory");
}

TEST_F(DatasetFiles, AtomicWriteCreatesParentsAndLeavesNoTemporaryFile) {
    const auto target = dir() / "sub" / "out.json";
    write_file_atomically(target, "first");
    write_file_atomically(target, "second");
    EXPECT_EQ(read_file(target), "second");
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir() / "sub")) ++entries;
    EXPECT_EQ(entries, 1u);
}

TEST_F(DatasetFiles, AtomicWriteOntoADirectoryFails) {
    EXPECT_EQ(input_error_of([&] { write_file_atomically(dir(), "x"); }),
              dir().string() + ": is a directory, expected a file");
}

// ---- shapesets and solutions ----

TEST_F(DatasetFiles, ShapesetLoadsAndWritesBackByteForByte) {
    const auto shapeset = load_shapeset(kData / "shapeset_small.json");
    ASSERT_EQ(shapeset.operations.size(), 2u);
    EXPECT_EQ(shapeset.operations[0].op, "mm");
    EXPECT_EQ(shapeset.operations[1].op, "bmm");
    EXPECT_EQ(shapeset.num_shapes(), 3u);
    EXPECT_EQ(shapeset.operations[1].shapes[0], make_shape(4, 64, 64, 32, "float32"));

    save_shapeset(shapeset, dir() / "s.json");
    EXPECT_EQ(read_file(dir() / "s.json"), read_file(kData / "shapeset_small.json"));
}

TEST_F(DatasetFiles, FlatSolutionLoadsAndWritesBack) {
    const auto solution = load_solution(kData / "solution_flat.json");
    EXPECT_FALSE(solution.is_per_op());
    ASSERT_EQ(solution.configs.size(), 2u);
    EXPECT_EQ(solution.configs[1].block_m, 128);
    EXPECT_TRUE(solution.configs[1].even_k);
    EXPECT_EQ(solution.configs_for("bmm").size(), 2u);

    save_solution(solution, dir() / "s.json");
    EXPECT_EQ(read_file(dir() / "s.json"), read_file(kData / "solution_flat.json"));
}

TEST_F(DatasetFiles, PerOpSolutionLoadsAndWritesBack) {
    const auto solution = load_solution(kData / "solution_per_op.json");
    ASSERT_TRUE(solution.is_per_op());
    EXPECT_EQ(solution.configs_for("mm").size(), 1u);
    EXPECT_EQ(solution.configs_for("addmm").size(), 2u);
    EXPECT_EQ(solution.configs_for("addmm")[0].name, "triton_addmm");

    save_solution(solution, dir() / "s.msgpack");
    save_solution(load_solution(dir() / "s.msgpack"), dir() / "s.json");
    EXPECT_EQ(read_file(dir() / "s.json"), read_file(kData / "solution_per_op.json"));
}

// ---- convert ----

TEST_F(DatasetFiles, ConvertKeepsTheLayoutAndCarriesTheSidecar) {
    fs::copy_file(kData / "dataset_legacy.json", dir() / "in.json");
    save_meta_sidecar(dir() / "in.json", OrderedJson::parse(R"({"run": {"repeat": 20}})"));

    EXPECT_EQ(convert_file(dir() / "in.json", dir() / "out.msgpack"), FileKind::dataset);
    EXPECT_EQ(convert_file(dir() / "out.msgpack", dir() / "back.json"), FileKind::dataset);

    EXPECT_EQ(read_file(dir() / "back.json"), read_file(kData / "dataset_legacy.json"));
    EXPECT_EQ(load_meta_sidecar(dir() / "back.json")["run"]["repeat"], 20);
}

TEST_F(DatasetFiles, ConvertCanSwitchToTheCurrentLayout) {
    convert_file(kData / "dataset_legacy.json", dir() / "current.json", DiodeLayout::current);
    DiodeLayout layout = DiodeLayout::legacy;
    const auto dataset = load_dataset(dir() / "current.json", layout);
    EXPECT_EQ(layout, DiodeLayout::current);
    EXPECT_EQ(dataset.num_timings(), 3u);
}

TEST_F(DatasetFiles, ConvertHandlesShapesetsAndRejectsBadFiles) {
    EXPECT_EQ(convert_file(kData / "shapeset_small.json", dir() / "s.msgpack"), FileKind::shapeset);
    EXPECT_EQ(load_shapeset(dir() / "s.msgpack").num_shapes(), 3u);
    EXPECT_NE(input_error_of([&] { convert_file(kData / "bad" / "zero_dim.json", dir() / "z.msgpack"); })
                  .find("must be positive"),
              std::string::npos);
    EXPECT_FALSE(fs::exists(dir() / "z.msgpack"));
}

// ---- bad input: one message per class, naming the file and the field ----

struct BadFile {
    const char* file;
    const char* expected;  // the message after "<path>: "
};

class BadDatasetFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadDatasetFile, IsRejectedWithItsMessage) {
    const auto path = kData / "bad" / GetParam().file;
    EXPECT_EQ(input_error_of([&] { load_dataset(path); }),
              path.string() + ": " + GetParam().expected);
}

const char* const kSolution0 = "hardware 'H100' > operation 'mm' > solution[0]";

INSTANTIATE_TEST_SUITE_P(
    EachClass, BadDatasetFile,
    ::testing::Values(
        BadFile{"missing.json", "no such file"},
        BadFile{"truncated.msgpack", "invalid msgpack: truncated data (the file ends inside a value)"},
        BadFile{"trailing.msgpack", "invalid msgpack: 2 bytes of garbage after the first value"},
        BadFile{"wrong_type_time.json",
                "hardware 'H100' > operation 'mm' > solution[0] > timed_configs[0] > time: "
                "expected a number, got string"},
        BadFile{"wrong_type_block.json",
                "hardware 'H100' > operation 'mm' > solution[0] > timed_configs[0] > config > "
                "block_m: expected an integer, got string"},
        BadFile{"config_not_object.json",
                "hardware 'H100' > operation 'mm' > solution[0] > timed_configs[0] > config: "
                "expected an object (or a JSON string of one), got integer"},
        BadFile{"zero_dim.json",
                "hardware 'H100' > operation 'mm' > solution[0] > shape key > M: must be positive, got 0"},
        BadFile{"negative_dim.json",
                "hardware 'H100' > operation 'mm' > solution[0] > shape key > K: must be positive, got -5"},
        BadFile{"unknown_dtype.json",
                "hardware 'H100' > operation 'mm' > solution[0] > shape key > M_dtype: unknown dtype "
                "'float17' (known: float16, bfloat16, float32, float64, int8, uint8, int16, int32, "
                "int64, float8_e4m3fn, float8_e5m2)"},
        BadFile{"unknown_op.json",
                "hardware 'H100' > operation 'conv': unknown operation 'conv' (expected mm, addmm or "
                "bmm, optionally followed by _nt, _tn or _tt)"},
        BadFile{"unknown_field.json",
                "hardware 'H100' > operation 'mm' > solution[0] > timed_configs[0]: unknown field 'spread'"},
        BadFile{"missing_time.json",
                "hardware 'H100' > operation 'mm' > solution[0] > timed_configs[0]: missing field 'time'"}),
    [](const ::testing::TestParamInfo<BadFile>& info) {
        std::string name = info.param.file;
        for (auto& c : name) {
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        }
        return name;
    });

// The wording after the position is nlohmann's; the position is ours to promise.
TEST(BadDatasetFile, TruncatedJsonNamesWhereTheFileEnds) {
    const auto path = kData / "bad" / "truncated.json";
    const auto message = input_error_of([&] { load_dataset(path); });
    // The file stops after line 14's newline and 9 spaces of indentation.
    EXPECT_EQ(message.rfind(path.string() + ": invalid JSON: parse error at line 15, column 10: ", 0), 0u)
        << message;
    EXPECT_NE(message.find("unexpected end of input"), std::string::npos) << message;
}

TEST(BadDatasetFile, GarbledJsonNamesTheFirstBadCharacter) {
    const auto path = kData / "bad" / "garbled.json";
    const auto message = input_error_of([&] { load_dataset(path); });
    EXPECT_EQ(message.rfind(path.string() + ": invalid JSON: parse error at line 1, column 1: ", 0), 0u)
        << message;
}

TEST(BadDatasetFile, GarbledMsgpackIsRejected) {
    const auto path = kData / "bad" / "garbled.msgpack";
    const auto message = input_error_of([&] { load_dataset(path); });
    EXPECT_EQ(message.rfind(path.string() + ": invalid msgpack: ", 0), 0u) << message;
}

TEST(BadDatasetFile, AShapesetIsNotADataset) {
    const auto path = kData / "shapeset_small.json";
    EXPECT_EQ(input_error_of([&] { load_dataset(path); }),
              path.string() + ": missing field 'hardware' (not a torch-diode dataset)");
}

TEST(BadDatasetFile, ADirectoryIsNotAFile) {
    EXPECT_EQ(input_error_of([&] { load_dataset(kData / "bad.json"); }),
              (kData / "bad.json").string() + ": no such file");
    EXPECT_EQ(input_error_of([&] { read_file(kData); }),
              kData.string() + ": is a directory, expected a file");
}

}  // namespace
}  // namespace mmt::core
