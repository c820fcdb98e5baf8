#pragma once
// Private to the CLI: the columns and row groups train-table and predict-table read from a CSV.

#include <cstddef>
#include <string>
#include <vector>

#include "matmul_toolkit/core/csv_table.hpp"

namespace mmt::cli {

struct TableColumns {
    std::vector<std::size_t> features;
    std::vector<std::string> feature_names;
    std::size_t target = 0;
    bool has_target = false;
    std::size_t group = 0;
    bool has_group = false;
};

/// The feature, target and group columns; `features` empty: every column but the target
/// and the group. `target` empty: none (predict-table). Throws InputError naming the option.
TableColumns select_table_columns(const core::CsvTable& table, const std::string& target,
                                  const std::vector<std::string>& features, const std::string& group_by);

/// Rows per group value, in order of first appearance; one unnamed group without grouping.
struct RowGroup {
    std::string name;
    std::vector<std::size_t> rows;
};
std::vector<RowGroup> group_rows(const core::CsvTable& table, const TableColumns& columns);

/// The rows' feature cells as numbers, row-major; the target cells. Throw InputError(source, ...).
std::vector<double> feature_rows(const core::CsvTable& table, const TableColumns& columns,
                                 const std::vector<std::size_t>& rows, const std::string& source);
std::vector<double> target_values(const core::CsvTable& table, const TableColumns& columns,
                                  const std::vector<std::size_t>& rows, const std::string& source);

}  // namespace mmt::cli
