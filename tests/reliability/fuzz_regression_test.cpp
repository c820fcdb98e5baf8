// Replays every input the fuzzers (fuzz/, scripts/fuzz.sh) once crashed on, from
// tests/fuzz/regressions/<target>/, through the same loader: each must load or be
// refused with core::InputError, nothing else. Runs in the sanitizer build too.

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {
namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(MMT_SOURCE_DIR) / "tests/fuzz/regressions";

TEST(FuzzRegression, EveryRecordedInputLoadsOrIsRefusedWithAnInputError) {
    const std::map<std::string, std::function<void(const fs::path&)>> loaders = {
        {"dataset_json", [](const fs::path& p) { (void)load_dataset(p); }},
        {"dataset_msgpack", [](const fs::path& p) { (void)load_dataset(p); }},
        {"shapeset", [](const fs::path& p) { (void)load_shapeset(p); }},
        {"solution", [](const fs::path& p) { (void)load_solution(p); }},
    };
    std::size_t replayed = 0;
    for (const auto& [target, load] : loaders) {
        if (!fs::is_directory(kRegressions / target)) continue;
        for (const auto& entry : fs::directory_iterator(kRegressions / target)) {
            try {
                load(entry.path());
            } catch (const InputError&) {
            } catch (const std::exception& e) {
                ADD_FAILURE() << entry.path() << ": " << e.what();
            }
            ++replayed;
        }
    }
    EXPECT_GE(replayed, 1u);
}

TEST(FuzzRegression, AMsgpackCountBeyondTheFileSizeIsRefusedBeforeAllocating) {
    // An 18-byte file whose array header claims 0xc5dfdd66 elements: msgpack used to
    // allocate 128 GiB for them.
    try {
        (void)load_dataset(kRegressions / "dataset_msgpack/huge_array_count.msgpack");
        FAIL() << "loaded";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("exceeds the file's size"), std::string::npos) << e.what();
    }
}

TEST(FuzzRegression, ANumberBeyondADoubleIsRefusedAsInvalidJson) {
    // nlohmann reports "32E768" as out_of_range, not parse_error: it escaped the loader.
    try {
        (void)load_shapeset(kRegressions / "shapeset/number_overflow.json");
        FAIL() << "loaded";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("invalid JSON"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)load_dataset(kRegressions / "dataset_json/shape_key_number_overflow.json"),
                 InputError);
}

}  // namespace
}  // namespace mmt::core
