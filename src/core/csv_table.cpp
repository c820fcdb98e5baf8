#include "matmul_toolkit/core/csv_table.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

/// Splits one line into cells; false when a quoted cell is not closed.
bool split_line(const std::string& line, std::vector<std::string>& cells) {
    cells.clear();
    std::string cell;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                cell.push_back('"');
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                cell.push_back(c);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            cells.push_back(cell);
            cell.clear();
        } else {
            cell.push_back(c);
        }
    }
    cells.push_back(cell);
    return !quoted;
}

std::string quote_if_needed(const std::string& cell) {
    if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
    std::string out = "\"";
    for (char c : cell) {
        if (c == '"') out.push_back('"');
        out.push_back(c);
    }
    return out + "\"";
}

}  // namespace

CsvTable read_csv(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw InputError(path.string(), "cannot read the file");
    CsvTable table;
    std::string line;
    std::vector<std::string> cells;
    std::size_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (!split_line(line, cells)) {
            throw InputError(path.string(), "line " + std::to_string(line_number) + ": a quoted cell is not closed");
        }
        if (table.columns.empty()) {
            std::set<std::string> seen;
            for (const auto& name : cells) {
                if (name.empty()) throw InputError(path.string(), "the header has an empty column name");
                if (!seen.insert(name).second) throw InputError(path.string(), "column '" + name + "' appears twice");
            }
            table.columns = cells;
            continue;
        }
        if (cells.size() != table.columns.size()) {
            throw InputError(path.string(), "line " + std::to_string(line_number) + ": " +
                                                std::to_string(cells.size()) + " cells, the header has " +
                                                std::to_string(table.columns.size()));
        }
        table.rows.push_back(cells);
    }
    if (table.columns.empty()) throw InputError(path.string(), "empty file: expected a header line");
    return table;
}

std::size_t csv_column(const CsvTable& table, const std::string& name, const std::string& option) {
    for (std::size_t i = 0; i < table.columns.size(); ++i) {
        if (table.columns[i] == name) return i;
    }
    std::string known;
    for (const auto& c : table.columns) known += (known.empty() ? "" : ", ") + c;
    throw InputError(option, "no column '" + name + "' (the file has: " + known + ")");
}

std::vector<double> csv_numbers(const CsvTable& table, std::size_t column, const std::string& source) {
    std::vector<double> values;
    values.reserve(table.rows.size());
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
        const std::string& cell = table.rows[r][column];
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(cell.c_str(), &end);
        if (cell.empty() || end != cell.c_str() + cell.size() || errno == ERANGE || !std::isfinite(value)) {
            // Row r is line r + 2 of a file without blank lines (the header is line 1).
            throw InputError(source, "row " + std::to_string(r + 1) + ", column '" + table.columns[column] +
                                         "': '" + cell + "' is not a finite number");
        }
        values.push_back(value);
    }
    return values;
}

std::string csv_text(const CsvTable& table) {
    std::ostringstream out;
    auto write_row = [&](const std::vector<std::string>& cells) {
        for (std::size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << quote_if_needed(cells[i]);
        out << "\n";
    };
    write_row(table.columns);
    for (const auto& row : table.rows) write_row(row);
    return out.str();
}

}  // namespace mmt::core
