#pragma once
// Private: writes a value tree as a PyTorch archive (zip with data.pkl + data/<n>
// storages), the layout torch.save uses. The pickle only names globals Python's
// torch.load(weights_only=True) allows (torch._utils._rebuild_tensor_v2,
// collections.OrderedDict, torch.<Type>Storage), which LibTorch's own pickle_save does
// not guarantee: it tags every dict and list with torch.jit._pickle.restore_type_tag.
// Reading is torch_archive_check.hpp's, without LibTorch; it also reads files saved from Python.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace mmt::model {

/// A Python value: None, bool, int, float, str, list, dict (str keys, ordered) or tensor.
struct PyValue {
    enum class Kind { none, boolean, integer, real, string, list, dict, tensor };
    Kind kind = Kind::none;
    bool boolean = false;
    std::int64_t integer = 0;
    double real = 0.0;
    std::string string;
    std::vector<PyValue> list;
    std::vector<std::pair<std::string, PyValue>> dict;
    at::Tensor tensor;

    static PyValue from_bool(bool v);
    static PyValue from_int(std::int64_t v);
    static PyValue from_double(double v);
    static PyValue from_string(std::string v);
    static PyValue from_tensor(const at::Tensor& v);
    static PyValue make_list();
    static PyValue make_dict();

    /// Appends to a dict value; returns *this for chaining.
    PyValue& set(const std::string& key, PyValue value);
    PyValue& append(PyValue value);
};

/// The bytes of a torch.save-compatible archive holding `root`.
std::string write_torch_archive(const PyValue& root);

}  // namespace mmt::model
