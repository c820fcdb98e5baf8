#include "table_columns.hpp"

#include <map>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::cli {
TableColumns select_table_columns(const core::CsvTable& table, const std::string& target,
                                  const std::vector<std::string>& features, const std::string& group_by) {
    TableColumns c;
    if (!target.empty()) {
        c.target = core::csv_column(table, target, "--target");
        c.has_target = true;
    }
    if (!group_by.empty()) {
        c.group = core::csv_column(table, group_by, "--group-by");
        c.has_group = true;
        if (c.has_target && c.group == c.target) throw core::InputError("--group-by", "is the target column");
    }
    if (features.empty()) {
        for (std::size_t i = 0; i < table.columns.size(); ++i) {
            if ((c.has_target && i == c.target) || (c.has_group && i == c.group)) continue;
            c.features.push_back(i);
        }
    } else {
        for (const auto& name : features) {
            const std::size_t i = core::csv_column(table, name, "--features");
            if ((c.has_target && i == c.target) || (c.has_group && i == c.group)) {
                throw core::InputError("--features", "'" + name + "' is the target or the group column");
            }
            c.features.push_back(i);
        }
    }
    if (c.features.empty()) throw core::InputError("--features", "no feature columns left");
    for (auto i : c.features) c.feature_names.push_back(table.columns[i]);
    return c;
}

std::vector<RowGroup> group_rows(const core::CsvTable& table, const TableColumns& columns) {
    std::vector<RowGroup> groups;
    std::map<std::string, std::size_t> index;
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
        const std::string name = columns.has_group ? table.rows[r][columns.group] : "";
        auto it = index.find(name);
        if (it == index.end()) {
            it = index.emplace(name, groups.size()).first;
            groups.push_back({name, {}});
        }
        groups[it->second].rows.push_back(r);
    }
    return groups;
}

std::vector<double> feature_rows(const core::CsvTable& table, const TableColumns& columns,
                                 const std::vector<std::size_t>& rows, const std::string& source) {
    // Whole columns are parsed so an error names the row of the file, not of the group.
    std::vector<std::vector<double>> by_column;
    for (auto c : columns.features) by_column.push_back(core::csv_numbers(table, c, source));
    std::vector<double> out;
    out.reserve(rows.size() * by_column.size());
    for (auto r : rows) {
        for (const auto& column : by_column) out.push_back(column[r]);
    }
    return out;
}

std::vector<double> target_values(const core::CsvTable& table, const TableColumns& columns,
                                  const std::vector<std::size_t>& rows, const std::string& source) {
    const auto all = core::csv_numbers(table, columns.target, source);
    std::vector<double> out;
    out.reserve(rows.size());
    for (auto r : rows) out.push_back(all[r]);
    return out;
}

}  // namespace mmt::cli
