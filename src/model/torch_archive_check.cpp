#include "torch_archive_check.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::model {
namespace {

constexpr std::size_t kMaxRecords = 4096;
constexpr std::size_t kMaxNameLength = 1024;
constexpr std::size_t kMaxGlobalLength = 128;
constexpr int kMaxDepth = 32;           // IValue trees are destroyed recursively
constexpr std::size_t kMaxTensorDims = 16;

constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kEndOfCentralDir = 0x06054b50;
constexpr std::uint32_t kZip64EndOfCentralDir = 0x06064b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string quoted(std::string_view s) {
    std::string out = "'";
    for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    if (s.size() > 64) out += "...";
    return out + "'";
}

bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return !__builtin_mul_overflow(a, b, &out);
}

bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
    return !__builtin_add_overflow(a, b, &out);
}

// A value on the pickle machine's stack: the shape LibTorch's unpickler will build, with
// the contents kept only where a later check needs them (tuples feed tensors).
struct Value {
    enum class Kind { none, boolean, integer, real, string, list, dict, tuple, global, storage_type, storage, tensor };
    enum class Global { rebuild_tensor, ordered_dict };

    Kind kind = Kind::none;
    std::int64_t integer = 0;   // integer; storage_type: item size; storage: element count
    std::string_view text;      // string (a view into data.pkl)
    Global global = Global::rebuild_tensor;
    std::shared_ptr<const std::vector<Value>> items;  // tuple
    int depth = 0;              // containers nested inside, this one included

    bool is_container() const { return kind == Kind::list || kind == Kind::dict || kind == Kind::tuple; }
};

const char* kind_name(Value::Kind kind) {
    switch (kind) {
        case Value::Kind::none: return "None";
        case Value::Kind::boolean: return "a bool";
        case Value::Kind::integer: return "an int";
        case Value::Kind::real: return "a float";
        case Value::Kind::string: return "a str";
        case Value::Kind::list: return "a list";
        case Value::Kind::dict: return "a dict";
        case Value::Kind::tuple: return "a tuple";
        case Value::Kind::global: return "a global";
        case Value::Kind::storage_type: return "a storage type";
        case Value::Kind::storage: return "a storage";
        case Value::Kind::tensor: return "a tensor";
    }
    return "?";
}

struct StorageType {
    const char* name;
    std::int64_t item_size;
};

// The torch.<Type>Storage globals LibTorch maps to a dtype our loader can convert. Not
// BoolStorage: a byte other than 0 or 1 read as a bool is undefined behaviour.
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", 4}, {"DoubleStorage", 8}, {"HalfStorage", 2}, {"BFloat16Storage", 2},
    {"LongStorage", 8},  {"IntStorage", 4},    {"ShortStorage", 2}, {"CharStorage", 1},
    {"ByteStorage", 1},
};

struct Record {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

class ArchiveChecker {
public:
    ArchiveChecker(std::string_view bytes, const std::string& where) : m_bytes(bytes), m_where(where) {}

    TorchArchiveSummary run() {
        read_zip();
        check_version();
        check_pickle(record_bytes("data.pkl"));
        return m_summary;
    }

private:
    [[noreturn]] void refuse(const std::string& why) const {
        throw core::InputError(m_where, "not a matmul_toolkit checkpoint: " + why);
    }

    // ---- zip ---------------------------------------------------------------------------

    std::uint64_t le(std::uint64_t pos, int width) const {
        if (pos > m_bytes.size() || static_cast<std::uint64_t>(width) > m_bytes.size() - pos) {
            refuse("a zip structure runs past the end of the file (truncated?)");
        }
        std::uint64_t v = 0;
        for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(m_bytes[pos + i]);
        return v;
    }
    std::uint64_t u16(std::uint64_t pos) const { return le(pos, 2); }
    std::uint64_t u32(std::uint64_t pos) const { return le(pos, 4); }
    std::uint64_t u64(std::uint64_t pos) const { return le(pos, 8); }

    bool signature_at(std::uint64_t pos, std::uint32_t sig) const {
        return pos <= m_bytes.size() && m_bytes.size() - pos >= 4 && u32(pos) == sig;
    }

    void read_zip() {
        const std::uint64_t size = m_bytes.size();
        if (size < 4 || u32(0) != kLocalHeader) refuse("not a zip archive (no local file header at the start)");
        if (size < 22) refuse("a zip archive too short to hold its directory (truncated?)");

        // The end-of-central-directory record: the last signature, as LibTorch's zip reader
        // finds it, with its comment reaching exactly the end of the file.
        std::uint64_t eocd = 0;
        bool found = false;
        const std::uint64_t lowest = size > 22 + 0xffff ? size - 22 - 0xffff : 0;
        for (std::uint64_t p = size - 22 + 1; p-- > lowest;) {
            if (signature_at(p, kEndOfCentralDir)) {
                eocd = p;
                found = true;
                break;
            }
        }
        if (!found || eocd + 22 + u16(eocd + 20) != size) {
            refuse("no zip end-of-central-directory record (truncated?)");
        }

        std::uint64_t disk = u16(eocd + 4), cd_disk = u16(eocd + 6);
        std::uint64_t entries_here = u16(eocd + 8), entries = u16(eocd + 10);
        std::uint64_t cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
        std::uint64_t cd_limit = eocd;

        if (eocd >= 20 && signature_at(eocd - 20, kZip64Locator)) {
            const std::uint64_t locator = eocd - 20;
            const std::uint64_t z = u64(locator + 8);
            if (u32(locator + 4) != 0 || u32(locator + 16) > 1) refuse("a multi-disk zip archive");
            if (z > locator || locator - z < 56 || !signature_at(z, kZip64EndOfCentralDir) ||
                u64(z + 4) + 12 != locator - z) {
                refuse("a broken zip64 end-of-central-directory record");
            }
            auto widen = [](std::uint64_t narrow, std::uint64_t wide, std::uint64_t saturated) {
                return narrow == saturated || narrow == wide;
            };
            const std::uint64_t z_disk = u32(z + 16), z_cd_disk = u32(z + 20);
            const std::uint64_t z_here = u64(z + 24), z_entries = u64(z + 32);
            const std::uint64_t z_cd_size = u64(z + 40), z_cd_offset = u64(z + 48);
            if (!widen(disk, z_disk, 0xffff) || !widen(cd_disk, z_cd_disk, 0xffff) ||
                !widen(entries_here, z_here, 0xffff) || !widen(entries, z_entries, 0xffff) ||
                !widen(cd_size, z_cd_size, 0xffffffff) || !widen(cd_offset, z_cd_offset, 0xffffffff)) {
                refuse("the zip64 and zip end-of-central-directory records disagree");
            }
            disk = z_disk, cd_disk = z_cd_disk, entries_here = z_here, entries = z_entries;
            cd_size = z_cd_size, cd_offset = z_cd_offset, cd_limit = z;
        } else if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
            refuse("zip64 directory fields without a zip64 record");
        }
        if (disk != 0 || cd_disk != 0 || entries_here != entries) refuse("a multi-disk zip archive");
        if (entries == 0) refuse("an empty zip archive");
        if (entries > kMaxRecords) refuse("more than " + std::to_string(kMaxRecords) + " records");
        if (cd_offset > cd_limit || cd_size != cd_limit - cd_offset) {
            refuse("the zip central directory is not where its end record says (truncated?)");
        }

        std::vector<std::pair<std::uint64_t, std::uint64_t>> extents;  // [local header, data end)
        std::map<std::string, bool> lowered;
        std::uint64_t pos = cd_offset;
        for (std::uint64_t n = 0; n < entries; ++n) {
            if (cd_limit - pos < 46 || !signature_at(pos, kCentralHeader)) {
                refuse("zip central directory entry " + std::to_string(n) + " is broken");
            }
            const std::uint64_t flags = u16(pos + 8), method = u16(pos + 10);
            std::uint64_t compressed = u32(pos + 20), uncompressed = u32(pos + 24);
            const std::uint64_t name_len = u16(pos + 28), extra_len = u16(pos + 30), comment_len = u16(pos + 32);
            std::uint64_t start_disk = u16(pos + 34), local = u32(pos + 42);
            const std::uint64_t external_attributes = u32(pos + 38);
            const std::uint64_t end = pos + 46 + name_len + extra_len + comment_len;
            if (end > cd_limit) refuse("zip central directory entry " + std::to_string(n) + " runs past the directory");
            const std::string_view name = m_bytes.substr(pos + 46, name_len);

            // Zip64 sizes and offsets, for the fields that are saturated.
            const bool wide_size = uncompressed == 0xffffffff, wide_compressed = compressed == 0xffffffff;
            const bool wide_local = local == 0xffffffff, wide_disk = start_disk == 0xffff;
            if (wide_size || wide_compressed || wide_local || wide_disk) {
                std::uint64_t x = pos + 46 + name_len;
                const std::uint64_t x_end = x + extra_len;
                bool done = false;
                while (!done && x_end - x >= 4) {
                    const std::uint64_t id = u16(x), len = u16(x + 2);
                    if (len > x_end - x - 4) break;
                    if (id == 1) {
                        std::uint64_t f = x + 4;
                        const std::uint64_t needed = 8 * (wide_size + wide_compressed + wide_local) + 4 * wide_disk;
                        if (len < needed) break;
                        if (wide_size) uncompressed = u64(f), f += 8;
                        if (wide_compressed) compressed = u64(f), f += 8;
                        if (wide_local) local = u64(f), f += 8;
                        if (wide_disk) start_disk = u32(f);
                        done = true;
                    }
                    x += 4 + len;
                }
                if (!done) refuse("record " + quoted(name) + " lacks its zip64 sizes");
            }

            if (name_len == 0 || name_len > kMaxNameLength) refuse("a record name is empty or too long");
            // torch.save names the folder after the file, so spaces and UTF-8 are fine.
            for (char c : name) {
                const auto u = static_cast<unsigned char>(c);
                if (u < 0x20 || u == 0x7f) refuse("record name " + quoted(name) + " has a control character");
            }
            if (!lowered.emplace(lower(name), true).second) refuse("two records are named " + quoted(name));
            if (flags & 0x2041) refuse("record " + quoted(name) + " is encrypted");
            // Beyond the data descriptor, UTF-8 names and deflate's level bits, LibTorch's zip
            // reader refuses (and its refusal at open leaks the reader's state).
            if (flags & ~std::uint64_t{0x080e}) {
                refuse("record " + quoted(name) + " uses zip features a checkpoint does not (flags " +
                       std::to_string(flags) + ")");
            }
            // LibTorch's zip reader hands back a directory's buffer unfilled (found by the
            // fuzzer: a version record with the DOS directory bit read as garbage).
            if (name.back() == '/' || (external_attributes & 0x10) != 0) {
                refuse("record " + quoted(name) + " is marked as a directory");
            }
            if (method != 0) {
                refuse("record " + quoted(name) + " is compressed (method " + std::to_string(method) +
                       "); checkpoints store records uncompressed");
            }
            if (compressed != uncompressed) refuse("record " + quoted(name) + " has two sizes");
            if (start_disk != 0) refuse("a multi-disk zip archive");

            // The local header: where the data starts.
            if (local > cd_offset || cd_offset - local < 30 || !signature_at(local, kLocalHeader)) {
                refuse("record " + quoted(name) + " has no local header where the directory says");
            }
            const std::uint64_t local_name_len = u16(local + 26), local_extra_len = u16(local + 28);
            const std::uint64_t data = local + 30 + local_name_len + local_extra_len;
            if (data > cd_offset || u16(local + 8) != 0 || m_bytes.substr(local + 30, local_name_len) != name) {
                refuse("record " + quoted(name) + " has a local header that does not match the directory");
            }
            if (uncompressed > cd_offset - data) refuse("record " + quoted(name) + " runs past the end of the data (truncated?)");
            if ((u16(local + 6) & 0x8) == 0) {
                const std::uint64_t local_size = u32(local + 22);
                if (local_size != 0xffffffff && local_size != uncompressed) {
                    refuse("record " + quoted(name) + " has a local header that does not match the directory");
                }
            }
            extents.emplace_back(local, data + uncompressed);

            if (n == 0) {
                const auto slash = name.find('/');
                if (slash == std::string_view::npos || slash == 0) {
                    refuse("record " + quoted(name) + " is not inside the archive's folder");
                }
                m_summary.prefix = std::string(name.substr(0, slash));
            }
            const std::string folder = m_summary.prefix + "/";
            if (name.size() <= folder.size() || name.compare(0, folder.size(), folder) != 0) {
                refuse("record " + quoted(name) + " is not inside the archive's folder " + quoted(m_summary.prefix));
            }
            m_records[std::string(name.substr(folder.size()))] = Record{data, uncompressed};
            pos = end;
        }
        if (pos != cd_limit) refuse("the zip central directory has bytes after its entries");

        std::sort(extents.begin(), extents.end());
        for (std::size_t i = 1; i < extents.size(); ++i) {
            if (extents[i].first < extents[i - 1].second) refuse("two records overlap");
        }
    }

    const Record* find(const std::string& name) const {
        const auto it = m_records.find(name);
        return it == m_records.end() ? nullptr : &it->second;
    }

    std::string_view record_bytes(const std::string& name) const {
        const Record* r = find(name);
        if (!r) refuse("the archive has no " + name + " record");
        return m_bytes.substr(r->offset, r->size);
    }

    void check_version() const {
        // LibTorch reads .data/version when present, else version.
        const std::string name = find(".data/version") ? ".data/version" : "version";
        std::string_view v = record_bytes(name);
        if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
        if (v.empty() || v.size() > 4 ||
            !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            refuse("the " + name + " record is not a number");
        }
        // The archive format versions LibTorch 1.13 reads (torch.save writes 3); LibTorch's
        // own refusal would leak its zip reader's state.
        const int version = std::stoi(std::string(v));
        if (version < 1 || version > 10) refuse("archive format version " + std::to_string(version) + " (1 to 10 are read)");
        if (const Record* order = find("byteorder")) {
            if (m_bytes.substr(order->offset, order->size) != "little") {
                refuse("the byteorder record is not 'little'");
            }
        }
    }

    // ---- pickle ------------------------------------------------------------------------

    [[noreturn]] void refuse_at(std::size_t at, const std::string& why) const {
        refuse("data.pkl byte " + std::to_string(at) + ": " + why);
    }

    void need(std::size_t bytes) const {
        if (bytes > m_pickle.size() - m_pos) refuse_at(m_pos, "the pickle ends inside an opcode");
    }

    std::uint64_t read_le(int width) {
        need(static_cast<std::size_t>(width));
        std::uint64_t v = 0;
        for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(m_pickle[m_pos + i]);
        m_pos += static_cast<std::size_t>(width);
        return v;
    }

    std::string_view read_line() {
        const auto nl = m_pickle.find('\n', m_pos);
        if (nl == std::string_view::npos || nl - m_pos > kMaxGlobalLength) refuse_at(m_pos, "a broken GLOBAL");
        const std::string_view line = m_pickle.substr(m_pos, nl - m_pos);
        for (char c : line) {
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) refuse_at(m_pos, "a broken GLOBAL");
        }
        m_pos = nl + 1;
        return line;
    }

    // Items above the innermost MARK: what an opcode without a MARK may consume.
    std::size_t free_items() const { return m_stack.size() - (m_marks.empty() ? 0 : m_marks.back()); }

    void require_free(std::size_t n, std::size_t at) const {
        if (free_items() < n) refuse_at(at, "an opcode needs " + std::to_string(n) + " values and finds fewer");
    }

    Value pop() {
        Value v = std::move(m_stack.back());
        m_stack.pop_back();
        return v;
    }

    void push(Value v, std::size_t at) {
        if (v.depth > kMaxDepth) refuse_at(at, "containers nested more than " + std::to_string(kMaxDepth) + " deep");
        m_stack.push_back(std::move(v));
    }

    static Value scalar(Value::Kind kind, std::int64_t integer = 0) {
        Value v;
        v.kind = kind;
        v.integer = integer;
        return v;
    }

    static Value container(Value::Kind kind) {
        Value v;
        v.kind = kind;
        v.depth = 1;
        if (kind == Value::Kind::tuple) v.items = std::make_shared<const std::vector<Value>>();
        return v;
    }

    Value tuple_of(std::vector<Value> items) {
        Value v = container(Value::Kind::tuple);
        for (const auto& item : items) v.depth = std::max(v.depth, item.depth + 1);
        v.items = std::make_shared<const std::vector<Value>>(std::move(items));
        return v;
    }

    // MARK ... opcode: the items above the innermost mark, taken off the stack.
    std::vector<Value> take_marked(std::size_t at, std::size_t& mark) {
        if (m_marks.empty()) refuse_at(at, "an opcode needs a MARK and there is none");
        mark = m_marks.back();
        m_marks.pop_back();
        std::vector<Value> items(std::make_move_iterator(m_stack.begin() + static_cast<std::ptrdiff_t>(mark)),
                                 std::make_move_iterator(m_stack.end()));
        m_stack.resize(mark);
        return items;
    }

    void check_key(const Value& key, std::size_t at) const {
        if (key.kind != Value::Kind::string && key.kind != Value::Kind::integer) {
            refuse_at(at, std::string("a dict key is ") + kind_name(key.kind) + ", not a str or int");
        }
    }

    Value& container_below(std::size_t mark, Value::Kind kind, std::size_t at) {
        if (mark == 0 || m_stack[mark - 1].kind != kind) {
            refuse_at(at, std::string(kind == Value::Kind::dict ? "SETITEMS" : "APPENDS") + " without " +
                              kind_name(kind) + " to fill");
        }
        return m_stack[mark - 1];
    }

    void grow(Value& target, const Value& item, std::size_t at) const {
        target.depth = std::max(target.depth, item.depth + 1);
        if (target.depth > kMaxDepth) refuse_at(at, "containers nested more than " + std::to_string(kMaxDepth) + " deep");
    }

    void global(std::size_t at) {
        const std::string_view module = read_line();
        const std::string_view name = read_line();
        Value v = scalar(Value::Kind::global);
        if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
            v.global = Value::Global::rebuild_tensor;
        } else if (module == "collections" && name == "OrderedDict") {
            v.global = Value::Global::ordered_dict;
        } else if (module == "torch") {
            const auto* type = std::find_if(std::begin(kStorageTypes), std::end(kStorageTypes),
                                            [&](const StorageType& t) { return name == t.name; });
            if (type == std::end(kStorageTypes)) {
                refuse_at(at, "the global torch." + std::string(name) + " is not a storage type a checkpoint uses");
            }
            v = scalar(Value::Kind::storage_type, type->item_size);
        } else {
            refuse_at(at, "the global " + std::string(module) + "." + std::string(name) +
                              " is not one a checkpoint uses");
        }
        push(std::move(v), at);
    }

    // BINPERSID ('storage', torch.<Type>Storage, key, location, numel): LibTorch reads
    // record data/<key> and trusts numel × item size to be its length.
    void persistent_load(std::size_t at) {
        require_free(1, at);
        const Value id = pop();
        const auto bad = [&](const std::string& why) { refuse_at(at, "a storage reference " + why); };
        if (id.kind != Value::Kind::tuple || id.items->size() != 5) bad("is not a 5-tuple");
        const auto& f = *id.items;
        if (f[0].kind != Value::Kind::string || f[0].text != "storage") bad("does not start with 'storage'");
        if (f[1].kind != Value::Kind::storage_type) bad("has no storage type");
        if (f[2].kind != Value::Kind::string || f[2].text.empty() || f[2].text.size() > 64) bad("has no key");
        if (f[3].kind != Value::Kind::string) bad("has no location");
        const std::string_view location = f[3].text;
        const bool cuda = location == "cuda" ||
                          (location.size() > 5 && location.size() <= 8 && location.substr(0, 5) == "cuda:" &&
                           std::all_of(location.begin() + 5, location.end(), [](char c) { return c >= '0' && c <= '9'; }));
        if (location != "cpu" && !cuda) bad("names the device " + quoted(location));
        if (f[4].kind != Value::Kind::integer || f[4].integer < 0) bad("has no element count");
        const auto numel = static_cast<std::uint64_t>(f[4].integer);
        std::uint64_t bytes = 0;
        if (!checked_mul(numel, static_cast<std::uint64_t>(f[1].integer), bytes)) bad("is too large");
        if (numel > 0) {
            const std::string record = "data/" + std::string(f[2].text);
            const Record* r = find(record);
            if (!r) bad("names the missing record " + quoted(record));
            if (r->size != bytes) {
                bad("claims " + std::to_string(bytes) + " bytes but record " + quoted(record) + " holds " +
                    std::to_string(r->size));
            }
        }
        if (!checked_add(m_summary.storage_elements, numel, m_summary.storage_elements)) bad("is too large");
        push(scalar(Value::Kind::storage, f[4].integer), at);
    }

    // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks): LibTorch sets
    // sizes and strides on the storage without checking that they stay inside it.
    Value rebuild_tensor(const Value& args, std::size_t at) {
        const auto bad = [&](const std::string& why) { refuse_at(at, "a tensor " + why); };
        if (args.kind != Value::Kind::tuple || args.items->size() != 6) bad("is not rebuilt from 6 arguments");
        const auto& a = *args.items;
        if (a[0].kind != Value::Kind::storage) bad("has no storage");
        if (a[1].kind != Value::Kind::integer || a[1].integer < 0) bad("has no storage offset");
        if (a[2].kind != Value::Kind::tuple || a[3].kind != Value::Kind::tuple) bad("has no sizes and strides");
        if (a[4].kind != Value::Kind::boolean) bad("has no requires_grad flag");
        if (a[5].kind != Value::Kind::none && a[5].kind != Value::Kind::dict) bad("has odd backward hooks");
        const auto& sizes = *a[2].items;
        const auto& strides = *a[3].items;
        if (sizes.size() != strides.size() || sizes.size() > kMaxTensorDims) bad("has mismatched sizes and strides");
        const auto storage = static_cast<std::uint64_t>(a[0].integer);
        const auto offset = static_cast<std::uint64_t>(a[1].integer);
        std::uint64_t numel = 1, last = offset;
        for (std::size_t d = 0; d < sizes.size(); ++d) {
            if (sizes[d].kind != Value::Kind::integer || strides[d].kind != Value::Kind::integer ||
                sizes[d].integer < 0 || strides[d].integer < 0) {
                bad("has a size or stride that is not a non-negative int");
            }
            const auto size = static_cast<std::uint64_t>(sizes[d].integer);
            std::uint64_t reach = 0;
            if (!checked_mul(numel, size, numel) ||
                (size > 0 && (!checked_mul(size - 1, static_cast<std::uint64_t>(strides[d].integer), reach) ||
                              !checked_add(last, reach, last)))) {
                bad("is too large");
            }
        }
        if (numel > 0 && (last >= storage || numel > storage)) {
            bad("reaches element " + std::to_string(last) + " of a storage of " + std::to_string(storage));
        }
        if (numel == 0 && offset > storage) bad("starts past its storage");
        ++m_summary.tensors;
        return scalar(Value::Kind::tensor);
    }

    void reduce(std::size_t at) {
        require_free(2, at);
        const Value args = pop();
        const Value callee = pop();
        if (callee.kind != Value::Kind::global) refuse_at(at, std::string("REDUCE calls ") + kind_name(callee.kind));
        if (callee.global == Value::Global::rebuild_tensor) {
            push(rebuild_tensor(args, at), at);
        } else {
            // LibTorch turns OrderedDict() (a tensor's empty backward hooks) into None.
            if (args.kind != Value::Kind::tuple || !args.items->empty()) refuse_at(at, "OrderedDict with arguments");
            push(scalar(Value::Kind::none), at);
        }
    }

    void memo_put(std::uint64_t id, std::size_t at) {
        require_free(1, at);
        if (id > m_memo.size()) refuse_at(at, "a memo slot far past the last one");
        if (id == m_memo.size()) m_memo.push_back(m_stack.back());
        else m_memo[id] = m_stack.back();
    }

    void memo_get(std::uint64_t id, std::size_t at) {
        if (id >= m_memo.size()) refuse_at(at, "a memo slot that was never filled");
        const Value& v = m_memo[id];
        // A second reference to a list or dict could make it contain itself.
        if (v.kind == Value::Kind::list || v.kind == Value::Kind::dict) {
            refuse_at(at, "a list or dict referenced twice");
        }
        push(v, at);
    }

    void check_pickle(std::string_view pickle) {
        m_pickle = pickle;
        m_pos = 0;
        if (pickle.size() < 2 || static_cast<unsigned char>(pickle[0]) != 0x80 || pickle[1] != 2) {
            refuse("data.pkl is not a protocol-2 pickle");
        }
        m_pos = 2;
        while (true) {
            if (m_pos >= m_pickle.size()) refuse_at(m_pos, "the pickle ends without STOP");
            const std::size_t at = m_pos;
            const auto op = static_cast<unsigned char>(m_pickle[m_pos++]);
            std::size_t mark = 0;
            switch (op) {
                case '(':  // MARK
                    m_marks.push_back(m_stack.size());
                    break;
                case '.':  // STOP
                    if (!m_marks.empty() || m_stack.size() != 1) refuse_at(at, "STOP leaves more than one value");
                    if (m_stack[0].kind != Value::Kind::dict) {
                        refuse_at(at, std::string("the pickle holds ") + kind_name(m_stack[0].kind) + ", not a dict");
                    }
                    if (m_pos != m_pickle.size()) refuse_at(m_pos, "bytes after STOP");
                    return;
                case '}': push(container(Value::Kind::dict), at); break;
                case ']': push(container(Value::Kind::list), at); break;
                case ')': push(container(Value::Kind::tuple), at); break;
                case 'N': push(scalar(Value::Kind::none), at); break;
                case 0x88: push(scalar(Value::Kind::boolean, 1), at); break;
                case 0x89: push(scalar(Value::Kind::boolean, 0), at); break;
                case 'K': push(scalar(Value::Kind::integer, static_cast<std::int64_t>(read_le(1))), at); break;
                case 'M': push(scalar(Value::Kind::integer, static_cast<std::int64_t>(read_le(2))), at); break;
                case 'J':
                    push(scalar(Value::Kind::integer, static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(4)))), at);
                    break;
                case 0x8a: {  // LONG1: LibTorch reads only the 8-byte form
                    if (read_le(1) != 8) refuse_at(at, "an integer that is not 8 bytes long");
                    push(scalar(Value::Kind::integer, static_cast<std::int64_t>(read_le(8))), at);
                    break;
                }
                case 'G':
                    need(8);
                    m_pos += 8;
                    push(scalar(Value::Kind::real), at);
                    break;
                case 'X': {  // BINUNICODE
                    const std::uint64_t len = read_le(4);
                    need(static_cast<std::size_t>(len));
                    Value v = scalar(Value::Kind::string);
                    v.text = m_pickle.substr(m_pos, static_cast<std::size_t>(len));
                    m_pos += static_cast<std::size_t>(len);
                    push(std::move(v), at);
                    break;
                }
                case 'c': global(at); break;
                case 't': push(tuple_of(take_marked(at, mark)), at); break;
                case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
                    const std::size_t n = op - 0x84u;
                    require_free(n, at);
                    std::vector<Value> items(std::make_move_iterator(m_stack.end() - static_cast<std::ptrdiff_t>(n)),
                                             std::make_move_iterator(m_stack.end()));
                    m_stack.resize(m_stack.size() - n);
                    push(tuple_of(std::move(items)), at);
                    break;
                }
                case 'e': {  // APPENDS
                    auto items = take_marked(at, mark);
                    Value& list = container_below(mark, Value::Kind::list, at);
                    for (const auto& item : items) grow(list, item, at);
                    break;
                }
                case 'u': {  // SETITEMS
                    auto items = take_marked(at, mark);
                    Value& dict = container_below(mark, Value::Kind::dict, at);
                    if (items.size() % 2 != 0) refuse_at(at, "SETITEMS with a key but no value");
                    for (std::size_t k = 0; k < items.size(); k += 2) {
                        check_key(items[k], at);
                        grow(dict, items[k + 1], at);
                    }
                    break;
                }
                case 's': {  // SETITEM
                    require_free(2, at);
                    if (m_stack.size() < 3 || m_stack[m_stack.size() - 3].kind != Value::Kind::dict) {
                        refuse_at(at, "SETITEM without a dict to fill");
                    }
                    const Value value = pop();
                    const Value key = pop();
                    check_key(key, at);
                    grow(m_stack.back(), value, at);
                    break;
                }
                case 'q': memo_put(read_le(1), at); break;
                case 'r': memo_put(read_le(4), at); break;
                case 'h': memo_get(read_le(1), at); break;
                case 'j': memo_get(read_le(4), at); break;
                case 'R': reduce(at); break;
                case 'Q': persistent_load(at); break;
                default: {
                    static const char* hex = "0123456789abcdef";
                    refuse_at(at, std::string("pickle opcode 0x") + hex[op >> 4] + hex[op & 15] +
                                      ", which a checkpoint does not use");
                }
            }
        }
    }

    std::string_view m_bytes;
    const std::string& m_where;
    std::map<std::string, Record> m_records;  // by name inside the archive's folder
    TorchArchiveSummary m_summary;

    std::string_view m_pickle;
    std::size_t m_pos = 0;
    std::vector<Value> m_stack;
    std::vector<std::size_t> m_marks;
    std::vector<Value> m_memo;
};

}  // namespace

TorchArchiveSummary check_torch_archive(std::string_view bytes, const std::string& where) {
    return ArchiveChecker(bytes, where).run();
}

}  // namespace mmt::model
