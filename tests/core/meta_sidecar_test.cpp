// The "<file>.meta.json" sidecar: where everything beyond torch-diode's layout is kept.

#include "matmul_toolkit/core/meta_sidecar.hpp"

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {
namespace fs = std::filesystem;

class MetaSidecar : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        m_dir = fs::temp_directory_path() /
                ("mmt_meta_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
    }
    void TearDown() override { fs::remove_all(m_dir); }
    fs::path dataset() const { return m_dir / "runs.json"; }

private:
    fs::path m_dir;
};

TEST_F(MetaSidecar, LivesBesideTheDatasetFile) {
    EXPECT_EQ(meta_sidecar_path("out/d.msgpack"), fs::path("out/d.msgpack.meta.json"));
}

TEST_F(MetaSidecar, IsAnEmptyObjectWhenAbsent) {
    EXPECT_EQ(load_meta_sidecar(dataset()), OrderedJson::object());
}

TEST_F(MetaSidecar, MergesObjectsKeyByKeyAndReplacesOtherValues) {
    merge_meta_sidecar(dataset(), OrderedJson::parse(R"({"run": {"warmup": 5, "repeat": 10}, "tags": [1]})"));
    merge_meta_sidecar(dataset(), OrderedJson::parse(R"({"run": {"repeat": 20}, "tags": [2]})"));

    EXPECT_EQ(read_file(meta_sidecar_path(dataset())),
              "{\n"
              "  \"run\": {\n"
              "    \"warmup\": 5,\n"
              "    \"repeat\": 20\n"
              "  },\n"
              "  \"tags\": [\n"
              "    2\n"
              "  ]\n"
              "}\n");
}

TEST_F(MetaSidecar, InductorTimingMethodIsTheRunsOwnOrInductorsBenchmarkerBeforeItWasNamed) {
    EXPECT_EQ(inductor_timing_method(OrderedJson::parse(
                  R"({"backend": "inductor", "environment": {"timing": "gated, padding off"}})")),
              "gated, padding off");
    EXPECT_EQ(inductor_timing_method(OrderedJson::parse(R"({"backend": "inductor", "environment": {}})")),
              "Inductor's benchmarker");
    EXPECT_EQ(inductor_timing_method(OrderedJson::parse(R"({"backend": "native"})")), "");
    EXPECT_EQ(inductor_timing_method(OrderedJson::array()), "");
}

TEST_F(MetaSidecar, MixedTimingWarningNamesTheFilesOfEachMethod) {
    const auto run_timed = [](const std::string& timing) {
        return OrderedJson{{"run", {{"backend", "inductor"}, {"environment", {{"timing", timing}}}}}};
    };
    const auto a = dataset().parent_path() / "a.msgpack", b = dataset().parent_path() / "b.msgpack",
               c = dataset().parent_path() / "c.msgpack", n = dataset().parent_path() / "native.json";
    save_meta_sidecar(a, run_timed("padding off"));
    save_meta_sidecar(b, run_timed("padding on"));
    save_meta_sidecar(c, run_timed("padding off"));
    save_meta_sidecar(n, OrderedJson{{"run", {{"backend", "native"}}}});
    const auto broken = dataset().parent_path() / "broken.json";
    write_file_atomically(meta_sidecar_path(broken), "[1, 2]");
    // No sidecar, an unreadable one, another backend, one method: nothing to say.
    EXPECT_EQ(mixed_timing_warning({a, c, n, dataset(), broken}), "");
    EXPECT_EQ(mixed_timing_warning({b, a, c, n}),
              "the datasets were timed different ways (their sidecars' run.environment.timing): \"padding off\": " +
                  a.string() + " " + c.string() + "; \"padding on\": " + b.string() + ".");
}

TEST_F(MetaSidecar, RejectsASidecarThatIsNotAnObject) {
    write_file_atomically(meta_sidecar_path(dataset()), "[1, 2]");
    try {
        load_meta_sidecar(dataset());
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_EQ(std::string(e.what()),
                  meta_sidecar_path(dataset()).string() + ": expected an object at the top level, got array");
    }
}

TEST(MetaProblemKey, JoinsHardwareOpAndShapeKey) {
    EXPECT_EQ(meta_problem_key("H100", "mm_nt", make_shape(1, 2, 3, 4, "int8")),
              "H100|mm_nt|{\"version\": 1, \"B\": 1, \"M\": 2, \"M_dtype\": \"int8\", \"N\": 3, "
              "\"K\": 4, \"K_dtype\": \"int8\", \"out_dtype\": \"int32\", \"out_size\": [1, 2, 3], "
              "\"out_stride\": [6, 3, 1]}");
}

TEST(MergeJsonObjects, ReplacesANonObjectTarget) {
    OrderedJson target = 3;
    merge_json_objects(target, OrderedJson::parse(R"({"a": 1})"));
    EXPECT_EQ(target, OrderedJson::parse(R"({"a": 1})"));
}

}  // namespace
}  // namespace mmt::core
