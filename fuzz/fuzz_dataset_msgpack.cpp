// libFuzzer target: core::load_dataset on a msgpack file.

#include "fuzz_input.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return mmt::fuzz::run_loader(data, size, ".msgpack", [](const std::filesystem::path& path) {
        (void)mmt::core::load_dataset(path);
    });
}
