#pragma once
// Private: reading a checkpoint archive without LibTorch. The walk trusts nothing: the zip
// structure first, then the pickle on a small stack machine restricted to the opcodes and
// globals a torch.save(weights_only) dict uses, with every tensor's storage record present
// and large enough (LibTorch 1.13's own zip reader and unpickler trust their input: a
// truncated archive made its zip reader read past the buffer, found by
// fuzz/fuzz_checkpoint.cpp). What passes comes back as values: dicts, lists, tuples, str,
// int, float, bool, None and tensors over the storages' raw little-endian bytes. No LibTorch
// here, so the fuzz build instruments all of it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmt::model {

/// What a checked archive holds.
struct TorchArchiveSummary {
    std::string prefix;                 ///< the folder every record sits in ("archive")
    std::size_t tensors = 0;            ///< tensors the pickle rebuilds
    std::uint64_t storage_elements = 0; ///< elements of every storage the pickle loads
};

/// The element types of the torch.<Type>Storage globals a checkpoint may name. Not
/// BoolStorage: a byte other than 0 or 1 read as a bool is undefined behaviour in LibTorch.
enum class StorageType { float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 };

/// A tensor as _rebuild_tensor_v2 lays it over a storage record. The checks guarantee that
/// every element the sizes and strides reach lies inside the storage.
struct ArchiveTensor {
    StorageType type = StorageType::float32;
    std::vector<std::int64_t> sizes;
    std::vector<std::int64_t> strides;
    std::int64_t storage_offset = 0;
    std::string_view storage;  ///< the record's bytes (a view into the archive)

    std::size_t numel() const;
    /// The elements in row-major order of `sizes`, each converted to double (exact for every
    /// float type and for integers up to 2^53).
    std::vector<double> values() const;
};

/// A value of the pickle. Strings and tensors view the archive's bytes, so a value is valid
/// only while the TorchArchive it came from lives.
struct ArchiveValue {
    // global, storage_type and storage are the pickle machine's own; the checks keep them
    // out of anything a reader looks at except as junk inside a container.
    enum class Kind { none, boolean, integer, real, string, list, dict, tuple, tensor, global, storage_type, storage };

    Kind kind = Kind::none;
    std::int64_t integer = 0;  ///< integer; boolean 0/1; storage_type: item size; storage: element count
    double real = 0.0;
    std::string_view text;     ///< string; storage: the record's bytes
    std::shared_ptr<std::vector<ArchiveValue>> items;                             ///< list, tuple
    std::shared_ptr<std::vector<std::pair<ArchiveValue, ArchiveValue>>> entries;  ///< dict, in file order
    std::shared_ptr<const ArchiveTensor> tensor;
    int depth = 0;  ///< containers nested inside, this one included

    bool is_string() const { return kind == Kind::string; }
    bool is_int() const { return kind == Kind::integer; }
    bool is_dict() const { return kind == Kind::dict; }
    bool is_list() const { return kind == Kind::list; }
    bool is_tensor() const { return kind == Kind::tensor; }
    /// A dict's value for a str key (the last one where a key repeats, as Python keeps it);
    /// nullptr when absent or when this is not a dict.
    const ArchiveValue* find(std::string_view key) const;
};

/// A read archive: its bytes (which the values view) and the pickle's root dict.
struct TorchArchive {
    std::shared_ptr<const std::string> bytes;
    ArchiveValue root;
    TorchArchiveSummary summary;
};

/// Reads `bytes`, a PyTorch zip archive whose data.pkl holds a dict of only dicts, lists,
/// tuples, str, int, float, bool, None and tensors (torch._utils._rebuild_tensor_v2 over a
/// torch.<Type>Storage). Throws core::InputError(where, "not a matmul_toolkit checkpoint:
/// <why>") for anything else.
TorchArchive read_torch_archive(std::string bytes, const std::string& where);

/// The same checks, keeping only the summary.
TorchArchiveSummary check_torch_archive(std::string_view bytes, const std::string& where);

}  // namespace mmt::model
