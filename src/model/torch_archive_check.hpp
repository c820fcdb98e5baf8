#pragma once
// Private: the checks a checkpoint passes before any of its bytes reach LibTorch.
// LibTorch 1.13's zip reader and unpickler trust their input (a truncated archive made its
// zip reader read past the buffer, found by fuzz/fuzz_checkpoint.cpp), so the loader walks
// the archive itself first: the zip structure, then the pickle on a small stack machine
// restricted to the opcodes and globals a torch.save(weights_only) dict uses, with every
// tensor's storage record present and large enough. No LibTorch here, so the fuzz build
// instruments all of it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mmt::model {

/// What a checked archive holds.
struct TorchArchiveSummary {
    std::string prefix;                 ///< the folder every record sits in ("archive")
    std::size_t tensors = 0;            ///< tensors the pickle rebuilds
    std::uint64_t storage_elements = 0; ///< elements of every storage the pickle loads
};

/// Checks that `bytes` is a PyTorch zip archive whose data.pkl LibTorch can read without
/// trusting it: a dict at the root; only dicts, lists, tuples, str, int, float, bool, None
/// and tensors (torch._utils._rebuild_tensor_v2 over a torch.<Type>Storage) inside. Throws
/// core::InputError(where, "not a matmul_toolkit checkpoint: <why>") otherwise.
TorchArchiveSummary check_torch_archive(std::string_view bytes, const std::string& where);

}  // namespace mmt::model
