#include "matmul_toolkit/collect/matmul_collector.hpp"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "matmul_toolkit/core/csv_table.hpp"
#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

using Json = nlohmann::ordered_json;

// The CSV columns, in order; JSON uses the same names.
const std::vector<std::string> kColumns = {"op", "layout", "dtype", "B", "M", "N", "K", "block_m", "block_n",
                                           "block_k", "group_m", "num_stages", "num_warps", "time_ms"};

void check(const MatmulRecord& r, const std::string& subject) {
    auto fail = [&](const std::string& what) { throw core::InputError(subject, what); };
    if (!core::is_known_op(r.op)) fail("unknown op '" + r.op + "' (expected mm, addmm or bmm)");
    if (!core::is_known_layout(r.layout)) fail("unknown layout '" + r.layout + "' (expected nn, nt, tn or tt)");
    if (!core::is_known_dtype(r.dtype)) fail("unknown dtype '" + r.dtype + "'");
    if (r.B < 1 || r.M < 1 || r.N < 1 || r.K < 1) fail("B, M, N and K must be at least 1");
    if (r.op != "bmm" && r.B != 1) fail(r.op + " has no batch: B must be 1");
    const auto& c = r.config;
    if (c.block_m < 1 || c.block_n < 1 || c.block_k < 1 || c.group_m < 1 || c.num_stages < 1 || c.num_warps < 1) {
        fail("block sizes, group_m, num_stages and num_warps must be at least 1");
    }
    if (!(r.time_ms > 0.0) || !std::isfinite(r.time_ms)) fail("time_ms must be a positive finite number");
}

std::string number(double value) {
    std::ostringstream out;
    out.precision(17);
    out << value;
    return out.str();
}

std::vector<std::string> cells(const MatmulRecord& r) {
    const auto& c = r.config;
    return {r.op,
            r.layout,
            r.dtype,
            std::to_string(r.B),
            std::to_string(r.M),
            std::to_string(r.N),
            std::to_string(r.K),
            std::to_string(c.block_m),
            std::to_string(c.block_n),
            std::to_string(c.block_k),
            std::to_string(c.group_m),
            std::to_string(c.num_stages),
            std::to_string(c.num_warps),
            number(r.time_ms)};
}

/// A row from its cells in kColumns order; numbers parsed strictly.
MatmulRecord from_cells(const std::vector<std::string>& v, const std::string& subject) {
    auto integer = [&](std::size_t i) {
        std::size_t used = 0;
        long long value = 0;
        try {
            value = std::stoll(v[i], &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != v[i].size()) throw core::InputError(subject, kColumns[i] + " '" + v[i] + "' is not an integer");
        return value;
    };
    MatmulRecord r;
    r.op = v[0];
    r.layout = v[1];
    r.dtype = v[2];
    r.B = integer(3);
    r.M = integer(4);
    r.N = integer(5);
    r.K = integer(6);
    r.config.block_m = static_cast<int>(integer(7));
    r.config.block_n = static_cast<int>(integer(8));
    r.config.block_k = static_cast<int>(integer(9));
    r.config.group_m = static_cast<int>(integer(10));
    r.config.num_stages = static_cast<int>(integer(11));
    r.config.num_warps = static_cast<int>(integer(12));
    r.config.name = r.op;
    std::size_t used = 0;
    try {
        r.time_ms = std::stod(v[13], &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != v[13].size()) throw core::InputError(subject, "time_ms '" + v[13] + "' is not a number");
    return r;
}

std::string extension_of(const std::filesystem::path& path) {
    const std::string ext = path.extension().string();
    if (ext != ".csv" && ext != ".json") {
        throw core::InputError(path.string(), "unknown extension '" + ext + "' (expected .csv or .json)");
    }
    return ext;
}

}  // namespace

void MatmulCollector::record(const MatmulRecord& record) {
    check(record, "record");
    m_records.push_back(record);
}

void MatmulCollector::save(const std::filesystem::path& path) const {
    if (extension_of(path) == ".csv") {
        core::CsvTable table;
        table.columns = kColumns;
        for (const auto& r : m_records) table.rows.push_back(cells(r));
        core::write_file_atomically(path, core::csv_text(table));
        return;
    }
    Json rows = Json::array();
    for (const auto& r : m_records) {
        Json row;
        const auto v = cells(r);
        for (std::size_t i = 0; i < kColumns.size(); ++i) {
            if (i < 3) row[kColumns[i]] = v[i];
            else if (i + 1 < kColumns.size()) row[kColumns[i]] = std::stoll(v[i]);
            else row[kColumns[i]] = r.time_ms;
        }
        rows.push_back(row);
    }
    core::write_file_atomically(path, Json{{"records", rows}}.dump(1) + "\n");
}

MatmulCollector MatmulCollector::load(const std::filesystem::path& path) {
    MatmulCollector collector;
    const std::string subject = path.string();
    if (extension_of(path) == ".csv") {
        const auto table = core::read_csv(path);
        std::vector<std::size_t> index;
        for (const auto& name : kColumns) index.push_back(core::csv_column(table, name, subject));
        for (std::size_t r = 0; r < table.rows.size(); ++r) {
            std::vector<std::string> v;
            for (auto i : index) v.push_back(table.rows[r][i]);
            const std::string row = subject + " row " + std::to_string(r + 1);
            auto record = from_cells(v, row);
            check(record, row);
            collector.m_records.push_back(record);
        }
        return collector;
    }
    try {
        const Json doc = Json::parse(core::read_file(path));
        std::size_t r = 0;
        for (const auto& row : doc.at("records")) {
            ++r;
            std::vector<std::string> v;
            for (const auto& name : kColumns) {
                const auto& cell = row.at(name);
                v.push_back(cell.is_string() ? cell.get<std::string>()
                            : cell.is_number_integer() ? std::to_string(cell.get<long long>())
                                                       : number(cell.get<double>()));
            }
            const std::string where = subject + " record " + std::to_string(r);
            auto record = from_cells(v, where);
            check(record, where);
            collector.m_records.push_back(record);
        }
    } catch (const nlohmann::json::exception& e) {
        throw core::InputError(subject, std::string("malformed records: ") + e.what());
    }
    return collector;
}

core::Dataset MatmulCollector::to_dataset(const std::string& hardware) const {
    core::Dataset dataset;
    for (const auto& r : m_records) {
        core::TimedConfig timed;
        timed.config = r.config;
        timed.config.name = r.op;
        timed.time_ms = r.time_ms;
        dataset.add_timing(hardware, core::op_key(r.op, r.layout), core::make_shape(r.B, r.M, r.N, r.K, r.dtype), timed);
    }
    return dataset;
}

}  // namespace mmt::collect
