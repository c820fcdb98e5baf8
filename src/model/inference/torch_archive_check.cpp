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
constexpr int kMaxDepth = 32;           // value trees (ours, LibTorch's) are destroyed recursively
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

using Value = ArchiveValue;

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
        case Value::Kind::tensor: return "a tensor";
        case Value::Kind::global: return "a global";
        case Value::Kind::storage_type: return "a storage type";
        case Value::Kind::storage: return "a storage";
    }
    return "?";
}

// What `integer` of a global value says it names.
enum class Global : std::int64_t { rebuild_tensor, ordered_dict };

struct StorageTypeName {
    const char* name;
    StorageType type;
    std::int64_t item_size;
};

// The torch.<Type>Storage globals LibTorch maps to a dtype our loader can convert.
constexpr StorageTypeName kStorageTypes[] = {
    {"FloatStorage", StorageType::float32, 4}, {"DoubleStorage", StorageType::float64, 8},
    {"HalfStorage", StorageType::float16, 2},  {"BFloat16Storage", StorageType::bfloat16, 2},
    {"LongStorage", StorageType::int64, 8},    {"IntStorage", StorageType::int32, 4},
    {"ShortStorage", StorageType::int16, 2},   {"CharStorage", StorageType::int8, 1},
    {"ByteStorage", StorageType::uint8, 1},
};

std::int64_t item_size(StorageType type) {
    for (const auto& t : kStorageTypes) {
        if (t.type == type) return t.item_size;
    }
    return 1;
}

struct Record {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

class ArchiveChecker {
public:
    ArchiveChecker(std::string_view bytes, const std::string& where) : m_bytes(bytes), m_where(where) {}

    /// The pickle's root dict; summary() then tells what the archive holds.
    Value run() {
        read_zip();
        check_version();
        return read_pickle(record_bytes("data.pkl"));
    }

    const TorchArchiveSummary& summary() const { return m_summary; }

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
        if (kind == Value::Kind::dict) {
            v.entries = std::make_shared<std::vector<std::pair<Value, Value>>>();
        } else {
            v.items = std::make_shared<std::vector<Value>>();
        }
        return v;
    }

    // Tuples are shared, never copied, by every memo reference to them.
    Value tuple_of(std::vector<Value> items) {
        Value v = container(Value::Kind::tuple);
        for (const auto& item : items) v.depth = std::max(v.depth, item.depth + 1);
        *v.items = std::move(items);
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
            v.integer = static_cast<std::int64_t>(Global::rebuild_tensor);
        } else if (module == "collections" && name == "OrderedDict") {
            v.integer = static_cast<std::int64_t>(Global::ordered_dict);
        } else if (module == "torch") {
            const auto* type = std::find_if(std::begin(kStorageTypes), std::end(kStorageTypes),
                                            [&](const StorageTypeName& t) { return name == t.name; });
            if (type == std::end(kStorageTypes)) {
                refuse_at(at, "the global torch." + std::string(name) + " is not a storage type a checkpoint uses");
            }
            v = scalar(Value::Kind::storage_type, static_cast<std::int64_t>(type->type));
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
        const auto type = static_cast<StorageType>(f[1].integer);
        std::uint64_t bytes = 0;
        if (!checked_mul(numel, static_cast<std::uint64_t>(item_size(type)), bytes)) bad("is too large");
        Value storage = scalar(Value::Kind::storage, f[4].integer);
        if (numel > 0) {
            const std::string record = "data/" + std::string(f[2].text);
            const Record* r = find(record);
            if (!r) bad("names the missing record " + quoted(record));
            if (r->size != bytes) {
                bad("claims " + std::to_string(bytes) + " bytes but record " + quoted(record) + " holds " +
                    std::to_string(r->size));
            }
            storage.text = m_bytes.substr(r->offset, r->size);
        }
        auto layout = std::make_shared<ArchiveTensor>();
        layout->type = type;
        layout->storage = storage.text;
        storage.tensor = std::move(layout);
        if (!checked_add(m_summary.storage_elements, numel, m_summary.storage_elements)) bad("is too large");
        push(std::move(storage), at);
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
        auto tensor = std::make_shared<ArchiveTensor>(*a[0].tensor);
        for (std::size_t d = 0; d < sizes.size(); ++d) {
            tensor->sizes.push_back(sizes[d].integer);
            tensor->strides.push_back(strides[d].integer);
        }
        tensor->storage_offset = a[1].integer;
        Value v = scalar(Value::Kind::tensor);
        v.tensor = std::move(tensor);
        return v;
    }

    void reduce(std::size_t at) {
        require_free(2, at);
        const Value args = pop();
        const Value callee = pop();
        if (callee.kind != Value::Kind::global) refuse_at(at, std::string("REDUCE calls ") + kind_name(callee.kind));
        if (callee.integer == static_cast<std::int64_t>(Global::rebuild_tensor)) {
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

    Value read_pickle(std::string_view pickle) {
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
                    return std::move(m_stack[0]);
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
                case 'G': {  // BINFLOAT: big-endian
                    need(8);
                    std::uint64_t bits = 0;
                    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(m_pickle[m_pos + i]);
                    m_pos += 8;
                    Value v = scalar(Value::Kind::real);
                    std::memcpy(&v.real, &bits, sizeof bits);
                    push(std::move(v), at);
                    break;
                }
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
                    for (auto& item : items) {
                        grow(list, item, at);
                        list.items->push_back(std::move(item));
                    }
                    break;
                }
                case 'u': {  // SETITEMS
                    auto items = take_marked(at, mark);
                    Value& dict = container_below(mark, Value::Kind::dict, at);
                    if (items.size() % 2 != 0) refuse_at(at, "SETITEMS with a key but no value");
                    for (std::size_t k = 0; k < items.size(); k += 2) {
                        check_key(items[k], at);
                        grow(dict, items[k + 1], at);
                        dict.entries->emplace_back(std::move(items[k]), std::move(items[k + 1]));
                    }
                    break;
                }
                case 's': {  // SETITEM
                    require_free(2, at);
                    if (m_stack.size() < 3 || m_stack[m_stack.size() - 3].kind != Value::Kind::dict) {
                        refuse_at(at, "SETITEM without a dict to fill");
                    }
                    Value value = pop();
                    Value key = pop();
                    check_key(key, at);
                    grow(m_stack.back(), value, at);
                    m_stack.back().entries->emplace_back(std::move(key), std::move(value));
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

float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t bits = 0;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa != 0) {  // subnormal: normalise
        int shift = 0;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            ++shift;
        }
        bits = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
    } else {
        bits = sign;
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// One little-endian element (x86 and ARM Linux are little-endian, as the writer assumes).
template <typename T>
T element_at(std::string_view storage, std::size_t index) {
    T v;
    std::memcpy(&v, storage.data() + index * sizeof(T), sizeof(T));
    return v;
}

double element(StorageType type, std::string_view storage, std::size_t index) {
    switch (type) {
        case StorageType::float32: return element_at<float>(storage, index);
        case StorageType::float64: return element_at<double>(storage, index);
        case StorageType::float16: return half_to_float(element_at<std::uint16_t>(storage, index));
        case StorageType::bfloat16: {
            const std::uint32_t bits = static_cast<std::uint32_t>(element_at<std::uint16_t>(storage, index)) << 16;
            float f;
            std::memcpy(&f, &bits, sizeof f);
            return f;
        }
        case StorageType::int64: return static_cast<double>(element_at<std::int64_t>(storage, index));
        case StorageType::int32: return element_at<std::int32_t>(storage, index);
        case StorageType::int16: return element_at<std::int16_t>(storage, index);
        case StorageType::int8: return element_at<std::int8_t>(storage, index);
        case StorageType::uint8: return element_at<std::uint8_t>(storage, index);
    }
    return 0.0;
}

}  // namespace

std::size_t ArchiveTensor::numel() const {
    std::size_t n = 1;
    for (auto s : sizes) n *= static_cast<std::size_t>(s);
    return n;
}

std::vector<double> ArchiveTensor::values() const {
    std::vector<double> out;
    const std::size_t n = numel();
    out.reserve(n);
    if (n == 0) return out;
    // An odometer over the indices, last dimension fastest.
    std::vector<std::int64_t> index(sizes.size(), 0);
    std::int64_t at = storage_offset;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(element(type, storage, static_cast<std::size_t>(at)));
        for (std::size_t d = sizes.size(); d-- > 0;) {
            if (++index[d] < sizes[d]) {
                at += strides[d];
                break;
            }
            at -= strides[d] * (sizes[d] - 1);
            index[d] = 0;
        }
    }
    return out;
}

const ArchiveValue* ArchiveValue::find(std::string_view key) const {
    if (kind != Kind::dict) return nullptr;
    for (auto it = entries->rbegin(); it != entries->rend(); ++it) {
        if (it->first.kind == Kind::string && it->first.text == key) return &it->second;
    }
    return nullptr;
}

TorchArchive read_torch_archive(std::string bytes, const std::string& where) {
    TorchArchive archive;
    archive.bytes = std::make_shared<const std::string>(std::move(bytes));
    ArchiveChecker reader(*archive.bytes, where);
    archive.root = reader.run();
    archive.summary = reader.summary();
    return archive;
}

TorchArchiveSummary check_torch_archive(std::string_view bytes, const std::string& where) {
    ArchiveChecker reader(bytes, where);
    (void)reader.run();
    return reader.summary();
}

}  // namespace mmt::model
