#include "torch_archive.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>

namespace mmt::model {
namespace {

// Pickle opcodes (protocol 2), as Python's pickle module names them.
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kEmptyTuple = ')';
constexpr char kTuple = 't';
constexpr char kBinUnicode = 'X';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kGlobal = 'c';
constexpr char kReduce = 'R';
constexpr char kBinPersId = 'Q';

class Pickler {
public:
    void write(const PyValue& root) {
        m_out.push_back(kProto);
        m_out.push_back('\x02');
        value(root);
        m_out.push_back(kStop);
    }

    const std::string& bytes() const { return m_out; }
    const std::vector<at::Tensor>& storages() const { return m_storages; }

private:
    void value(const PyValue& v) {
        switch (v.kind) {
            case PyValue::Kind::none: m_out.push_back(kNone); break;
            case PyValue::Kind::boolean: m_out.push_back(v.boolean ? kNewTrue : kNewFalse); break;
            case PyValue::Kind::integer: integer(v.integer); break;
            case PyValue::Kind::real: real(v.real); break;
            case PyValue::Kind::string: string(v.string); break;
            case PyValue::Kind::list:
                m_out.push_back(kEmptyList);
                if (!v.list.empty()) {
                    m_out.push_back(kMark);
                    for (const auto& item : v.list) value(item);
                    m_out.push_back(kAppends);
                }
                break;
            case PyValue::Kind::dict:
                m_out.push_back(kEmptyDict);
                if (!v.dict.empty()) {
                    m_out.push_back(kMark);
                    for (const auto& [key, item] : v.dict) {
                        string(key);
                        value(item);
                    }
                    m_out.push_back(kSetItems);
                }
                break;
            case PyValue::Kind::tensor: tensor(v.tensor); break;
        }
    }

    template <typename T>
    void little_endian(T value) {
        char bytes[sizeof(T)];
        std::memcpy(bytes, &value, sizeof(T));  // x86 and ARM Linux are little-endian
        m_out.append(bytes, sizeof(T));
    }

    void integer(std::int64_t v) {
        if (v >= 0 && v <= 0xff) {
            m_out.push_back(kBinInt1);
            m_out.push_back(static_cast<char>(v));
        } else if (v >= 0 && v <= 0xffff) {
            m_out.push_back(kBinInt2);
            little_endian(static_cast<std::uint16_t>(v));
        } else if (v >= std::numeric_limits<std::int32_t>::min() &&
                   v <= std::numeric_limits<std::int32_t>::max()) {
            m_out.push_back(kBinInt);
            little_endian(static_cast<std::int32_t>(v));
        } else {
            m_out.push_back(kLong1);
            m_out.push_back('\x08');
            little_endian(v);  // two's complement, as pickle's LONG1 expects
        }
    }

    void real(double v) {
        m_out.push_back(kBinFloat);
        char bytes[8];
        std::memcpy(bytes, &v, 8);
        for (int i = 7; i >= 0; --i) m_out.push_back(bytes[i]);  // BINFLOAT is big-endian
    }

    void string(const std::string& s) {
        m_out.push_back(kBinUnicode);
        little_endian(static_cast<std::uint32_t>(s.size()));
        m_out += s;
    }

    void global(const char* module, const std::string& name) {
        m_out.push_back(kGlobal);
        m_out += module;
        m_out.push_back('\n');
        m_out += name;
        m_out.push_back('\n');
    }

    static std::string storage_name(at::ScalarType type) {
        switch (type) {
            case at::kFloat: return "FloatStorage";
            case at::kDouble: return "DoubleStorage";
            case at::kLong: return "LongStorage";
            case at::kInt: return "IntStorage";
            default: throw std::invalid_argument("checkpoint tensors must be float32, float64, int32 or int64");
        }
    }

    // torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
    // backward_hooks), the storage being a persistent id that names record data/<key>.
    void tensor(const at::Tensor& input) {
        const at::Tensor t = input.detach().to(at::kCPU).contiguous().clone();
        const std::string key = std::to_string(m_storages.size());
        m_storages.push_back(t);

        global("torch._utils", "_rebuild_tensor_v2");
        m_out.push_back(kMark);
        m_out.push_back(kMark);
        string("storage");
        global("torch", storage_name(t.scalar_type()));
        string(key);
        string("cpu");
        integer(t.numel());
        m_out.push_back(kTuple);
        m_out.push_back(kBinPersId);
        integer(0);
        m_out.push_back(kMark);
        for (auto size : t.sizes()) integer(size);
        m_out.push_back(kTuple);
        m_out.push_back(kMark);
        for (auto stride : t.strides()) integer(stride);
        m_out.push_back(kTuple);
        m_out.push_back(kNewFalse);
        global("collections", "OrderedDict");
        m_out.push_back(kEmptyTuple);
        m_out.push_back(kReduce);
        m_out.push_back(kTuple);
        m_out.push_back(kReduce);
    }

    std::string m_out;
    std::vector<at::Tensor> m_storages;
};

}  // namespace

PyValue PyValue::from_bool(bool v) { PyValue p; p.kind = Kind::boolean; p.boolean = v; return p; }
PyValue PyValue::from_int(std::int64_t v) { PyValue p; p.kind = Kind::integer; p.integer = v; return p; }
PyValue PyValue::from_double(double v) { PyValue p; p.kind = Kind::real; p.real = v; return p; }
PyValue PyValue::from_string(std::string v) { PyValue p; p.kind = Kind::string; p.string = std::move(v); return p; }
PyValue PyValue::from_tensor(const at::Tensor& v) { PyValue p; p.kind = Kind::tensor; p.tensor = v; return p; }
PyValue PyValue::make_list() { PyValue p; p.kind = Kind::list; return p; }
PyValue PyValue::make_dict() { PyValue p; p.kind = Kind::dict; return p; }

PyValue& PyValue::set(const std::string& key, PyValue value) {
    dict.emplace_back(key, std::move(value));
    return *this;
}

PyValue& PyValue::append(PyValue value) {
    list.push_back(std::move(value));
    return *this;
}

std::string write_torch_archive(const PyValue& root) {
    Pickler pickler;
    pickler.write(root);

    std::string archive;
    caffe2::serialize::PyTorchStreamWriter writer([&archive](const void* data, size_t size) {
        archive.append(static_cast<const char*>(data), size);
        return size;
    });
    writer.writeRecord("data.pkl", pickler.bytes().data(), pickler.bytes().size());
    static const char kByteOrder[] = "little";
    writer.writeRecord("byteorder", kByteOrder, sizeof(kByteOrder) - 1);
    for (std::size_t i = 0; i < pickler.storages().size(); ++i) {
        const at::Tensor& t = pickler.storages()[i];
        writer.writeRecord("data/" + std::to_string(i), t.data_ptr(),
                           static_cast<size_t>(t.numel()) * t.element_size());
    }
    writer.writeEndOfFile();
    return archive;
}

}  // namespace mmt::model
