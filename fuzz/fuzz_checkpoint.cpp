// libFuzzer target: model::Predictor::load, the loader `recommend`, `validate-model`,
// `export-lut` and `validate-max-autotune` use, on a checkpoint file.

#include "fuzz_input.hpp"
#include "matmul_toolkit/model/predictor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return mmt::fuzz::run_loader(data, size, ".pt", [](const std::filesystem::path& path) {
        (void)mmt::model::Predictor::load(path, "cpu");
    });
}
