// libFuzzer target: model::InferenceModel::load, the loader of `recommend`, `export-lut` and
// libmmt_rank.so, on a checkpoint file: the archive walk (src/model/inference/
// torch_archive_check.cpp), the checkpoint's checks, the fold. Predictor::load (`train`'s
// side, `validate-model`) reads through the same code before LibTorch gets the weights.
//
// Seeds (tests/fuzz/corpus/checkpoint), remade when the features change so the fuzzer
// reaches past the feature check:
//   matmul_toolkit train --dataset data/datasets/sample_cpu.json --model base_tiny.pt
//       --model-type base --hidden-dims 4,3 --num-epochs 2 --seed 1
//   matmul_toolkit train --dataset data/datasets/sample_cpu.json --model deep_tiny.pt
//       --model-type deep --hidden-dim 4 --num-layers 1 --num-epochs 2 --seed 2
//   python3 tests/fuzz/python_style_checkpoint.py base_tiny.pt python_style.pt

#include "fuzz_input.hpp"
#include "matmul_toolkit/model/inference_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    return mmt::fuzz::run_loader(data, size, ".pt", [](const std::filesystem::path& path) {
        (void)mmt::model::InferenceModel::load(path);
    });
}
